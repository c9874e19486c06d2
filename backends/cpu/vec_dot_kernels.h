// Internal to hearth_quants: the table of kernels one SIMD level provides. Each ISA lives
// in its own translation unit compiled with that ISA's flags; nothing else in the library
// is, so the binary runs on any x86-64 (or non-x86) CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/vec_dot.h"
#include "common/dtype.h"

namespace hearth::cpu::detail {

// One gemm call: Y[t * ys + r] = dot(W row r, A row t) for r in [r0, r1), t in [0, n_tok).
struct GemmArgs {
  int64_t n;         // elements per row
  const uint8_t* w;  // row 0 of W
  size_t ws;         // bytes between weight rows
  int64_t r0, r1;
  const uint8_t* a;  // token 0 of A
  size_t as;         // bytes between activation rows
  int64_t n_tok;
  float* y;
  size_t ys;  // floats between output rows (tokens)
};

using GemmFn = void (*)(const GemmArgs&);
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);

constexpr int kMaxTypeId = 32;

// Indexed by DType id; nullptr where the level has no kernel (the scalar one is used).
struct KernelTable {
  GemmFn gemm[kMaxTypeId] = {};
  // On repacked rows (repack.h): GemmArgs::w is group 0, ws the bytes of one 16-row group,
  // r0 and r1 multiples of 16.
  GemmFn gemm_repacked[kMaxTypeId] = {};
  QuantizeFn quantize[kMaxTypeId] = {};
};

const KernelTable& scalar_kernels();
#if defined(HEARTH_X86_KERNELS)
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
#if defined(HEARTH_AMX_KERNELS)
// avx512_kernels() with AMX tiles in the prefill GEMMs (vec_dot_amx.cpp).
const KernelTable& amx_kernels();
// reps x 4 tdpbssd (16 x 16 x 64 multiply-adds each) on tiles, operands in tiles: the AMX
// unit's own rate, for amx_int8_gops. Returns a checksum.
int64_t amx_peak_loop(int64_t reps);
#endif
#endif

// HEARTH_PREFETCH_BYTES=N (N > 0): every repacked kernel's weight prefetch distance, to
// measure a machine; 0 when unset. Read once, here, by vec_dot.cpp: an initializer in a
// file built for one ISA could run that ISA's instructions on any CPU at start-up (with it
// in the AVX-512 file, every binary died of SIGILL before main on an AVX2 machine whenever
// the variable was set).
extern const int64_t kPrefetchBytesOverride;

inline int type_index(DType t) {
  return static_cast<int>(t);
}

// The repacked-layout kernel of `level` for w (the level clamped to the CPU's), or null.
GemmFn gemm_repacked_fn(SimdLevel level, DType w);

}  // namespace hearth::cpu::detail
