// AVX-512 (F/BW/VL/DQ) + VNNI kernels: the x86 kernels with vpdpbusd / vpdpwssd dots,
// mask-register bit expansion and bigger tiles (32 vector registers). 256-bit vectors: the
// blocks are 32 elements wide, and on Zen 4 512-bit ops cost two 256-bit ones anyway.
#define HEARTH_VNNI 1
#include "backends/cpu/vec_dot_x86.inc"

namespace hearth::cpu::detail {

const KernelTable& avx512_kernels() {
  static const KernelTable kTable = make_table();
  return kTable;
}

}  // namespace hearth::cpu::detail
