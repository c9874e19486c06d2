// AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c).
#define HEARTH_VNNI 0
#include "backends/cpu/vec_dot_x86.inc"

namespace hearth::cpu::detail {

const KernelTable& avx2_kernels() {
  static const KernelTable kTable = make_table();
  return kTable;
}

}  // namespace hearth::cpu::detail
