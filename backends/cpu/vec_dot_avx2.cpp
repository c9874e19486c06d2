// AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c).
#define HEARTH_VNNI 0
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot_x86.inc"
// After vec_dot_x86.inc: it uses that file's helpers.
#include "backends/cpu/gemm_q0_avx2.inc"
#include "backends/cpu/gemm_q4k_avx2.inc"

namespace hearth::cpu::detail {

const KernelTable& avx2_kernels() {
  static const KernelTable kTable = [] {
    KernelTable k = make_table();
    use_q0_avx2_kernels(k);
    use_q4k_avx2_kernels(k);
    return k;
  }();
  return kTable;
}

}  // namespace hearth::cpu::detail
