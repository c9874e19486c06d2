// The AMX level: the AVX-512 level's kernels (this file builds them again, with the same
// flags plus AMX-TILE / AMX-INT8, so it needs nothing with external linkage from the
// AVX-512 file) with the prefill GEMMs of gemm_amx.inc on AMX-INT8 tiles. Only this file is
// compiled with the AMX flags, and its table is used only where detect_simd_level() found
// AMX-INT8 and Linux granted the tile state.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in vec_dot_avx512.cpp
#define HEARTH_VNNI 1
#define HEARTH_PREFETCH_TILES 8
#include <algorithm>
#include <cstdlib>

#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot_x86.inc"
// After vec_dot_x86.inc, in this order, as in vec_dot_avx512.cpp.
#include "backends/cpu/gemm_q0_avx512.inc"
// q4k and q6k use q0's helpers.
#include "backends/cpu/gemm_q4k_avx512.inc"
#include "backends/cpu/gemm_q6k_avx512.inc"
// After the AVX-512 kernels: it uses their layouts and tiles.
#include "backends/cpu/gemm_amx.inc"

namespace hearth::cpu::detail {

int64_t amx_peak_loop(int64_t reps) {
  const amx::TileScope tiles(2, 64);  // every tile 16 x 64 bytes
  alignas(64) int8_t ops[16 * 64];
  for (int i = 0; i < 16 * 64; ++i) ops[i] = static_cast<int8_t>(i % 7 - 3);
  _tile_loadd(4, ops, 64);
  _tile_loadd(5, ops, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t r = 0; r < reps; ++r) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 5);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 5);
  }
  alignas(64) int32_t out[16 * 16];
  _tile_stored(3, out, 64);
  return out[0];
}

const KernelTable& amx_kernels() {
  static const KernelTable kTable = [] {
    KernelTable k = make_table();
    use_q0_kernels(k);
    use_q4k_kernels(k);
    use_q6k_kernels(k);
    use_amx_kernels(k);
    return k;
  }();
  return kTable;
}

}  // namespace hearth::cpu::detail
