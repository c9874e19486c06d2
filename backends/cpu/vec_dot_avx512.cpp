// AVX-512 (F/BW/VL/DQ) + VNNI kernels: the x86 kernels with vpdpbusd / vpdpwssd dots,
// mask-register bit expansion and bigger tiles (32 vector registers), 256-bit vectors in
// the generic tile kernels (the software prefetch there reaches 8 tiles ahead).
// Q4_0, Q5_0, Q8_0, Q4_K and Q6_K use the 16-row interleaved kernels of
// gemm_q0_avx512.inc, gemm_q4k_avx512.inc and gemm_q6k_avx512.inc, on plain rows and on
// rows repacked at load (repack.h).
//
// GCC 12 reports the _mm512_undefined_*() pass-through of its own unmasked AVX-512
// intrinsics (unpack, cvtph) as "may be used uninitialized" once they are inlined into
// loops: a false positive about the headers, not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define HEARTH_VNNI 1
#define HEARTH_PREFETCH_TILES 8
#include <algorithm>
#include <cstdlib>

#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot_x86.inc"
// After vec_dot_x86.inc: it uses that file's helpers.
#include "backends/cpu/gemm_q0_avx512.inc"
#include "backends/cpu/gemm_q4k_avx512.inc"
#include "backends/cpu/gemm_q6k_avx512.inc"

namespace hearth::cpu::detail {

const KernelTable& avx512_kernels() {
  static const KernelTable kTable = [] {
    KernelTable k = make_table();
    use_q0_kernels(k);
    use_q4k_kernels(k);
    use_q6k_kernels(k);
    return k;
  }();
  return kTable;
}

}  // namespace hearth::cpu::detail
