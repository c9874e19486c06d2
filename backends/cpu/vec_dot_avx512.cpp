// AVX-512 (F/BW/VL/DQ) + VNNI kernels: the x86 kernels with vpdpbusd / vpdpwssd dots,
// mask-register bit expansion and bigger tiles (32 vector registers). Mostly 256-bit
// vectors (blocks are 32 elements wide); the *_0 x Q8_0 kernels put two blocks in each
// 512-bit vector (Zen 5 has full-width 512-bit units). Their decode loop runs fewer
// instructions per byte, so the software prefetch reaches further ahead (8 tiles).
#define HEARTH_VNNI 1
#define HEARTH_PREFETCH_TILES 8
#include "backends/cpu/vec_dot_x86.inc"

namespace hearth::cpu::detail {

const KernelTable& avx512_kernels() {
  static const KernelTable kTable = make_table();
  return kTable;
}

}  // namespace hearth::cpu::detail
