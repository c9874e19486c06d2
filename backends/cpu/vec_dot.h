// Dot products of a weight row with an activation row, and the small GEMM built on them,
// with runtime dispatch between a scalar path and SIMD paths (AVX2, AVX-512).
//
// A weight row of type W is dotted with an activation row of type vec_dot_type(W): the
// activations are first quantized with quantize_activations (e.g. f32 -> Q8_0 for Q5_0
// weights), exactly as ggml does, so results match llama.cpp's CPU backend closely.
//
// Determinism contract: at a given SimdLevel, gemm writes for every (row, token) exactly
// the float that vec_dot_at(level, ...) returns for that pair, whatever the batch size or
// row range. Different levels may differ in the last bits (different summation order).
//
// Thread-safety: all functions are reentrant; set_simd_level is meant for start-up and
// tests (it is atomic, but a gemm running concurrently may use either level).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/dtype.h"

namespace hearth::cpu {

// Scalar: portable C++. AVX2: AVX2 + FMA + F16C. AVX512: AVX-512 F/BW/VL/DQ + VNNI (plus
// the AVX2 set); a CPU with AVX-512 but no VNNI (Skylake-SP) runs the AVX2 level. AMX: the
// AVX512 level plus AMX-INT8 tiles (Sapphire Rapids and later) for prefill GEMMs, where
// Linux grants the process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM); its results are
// the AVX512 level's bit for bit (the tiles compute the same exact integer sums).
enum class SimdLevel { Scalar = 0, AVX2 = 1, AVX512 = 2, AMX = 3 };

// The best level this CPU (and OS) supports. The first call asks Linux for the AMX tile
// state when the CPU has AMX-INT8 (once per process; the grant covers every thread).
SimdLevel detect_simd_level();
// The level vec_dot / gemm / quantize_activations use: at first use the detected level,
// lowered to $HEARTH_SIMD when that names a lower level ("scalar", "avx2", "avx512", "amx"),
// and below AMX when $HEARTH_AMX is "0" (AMX off, for comparison).
SimdLevel active_simd_level();
// The level those variables leave of `detected` (either may be null: unset).
SimdLevel level_from_env(SimdLevel detected, const char* hearth_simd, const char* hearth_amx);
// Sets the active level, clamped to detect_simd_level(); returns the level now active.
SimdLevel set_simd_level(SimdLevel level);
// The AMX-INT8 unit's rate on `threads` threads at once, in 10^9 int8 operations a second
// (2 per multiply-add; the best of 3 rounds, each thread timed by its own CPU time):
// tdpbssd into 4 tiles, operands held in tiles, the ceiling the AMX level's prefill works
// against. 0 where AMX is not detected.
double amx_int8_gops(int threads);
// How many weight streams one thread reads at once in a pass of up to 8 tokens over
// repacked rows (*_0, Q4_K, Q6_K at AVX-512: decode, drafts verified, a few sequences): 2
// walks the first and second halves of a call's row groups a block of each in turn, 1 one
// group after another; 0 (the default) lets the kernel choose
// (2 on CPUs whose weight prefetches use prefetcht0, the Intel ones; 1 elsewhere).
// $HEARTH_DECODE_STREAMS=1|2 sets it at start; the outputs are the same bits either way.
// set_decode_streams returns the previous value.
int decode_streams();
int set_decode_streams(int n);
// "scalar", "avx2", "avx512", "amx".
const char* simd_level_name(SimdLevel level);
// Accepts the names above (case-insensitive); false (and *out untouched) otherwise.
bool parse_simd_level(std::string_view name, SimdLevel* out);

// The activation type weight type w is dotted with: Q4_0/Q5_0/Q8_0 -> Q8_0,
// Q4_1/Q5_1 -> Q8_1, Q4_K/Q5_K/Q6_K -> Q8_K, F32/F16/BF16 -> F32.
DType vec_dot_type(DType w);
// Whether vec_dot / gemm handle weight type w.
bool vec_dot_supported(DType w);

// dst = row_bytes(act_type, n) bytes: x[0..n) quantized to act_type (Q8_0, Q8_1, Q8_K or
// F32), bitwise equal to quantize_row(act_type, ...) at every level.
void quantize_activations(DType act_type, const float* x, void* dst, int64_t n);
void quantize_activations_at(SimdLevel level, DType act_type, const float* x, void* dst, int64_t n);

// sum_i w[i] * a[i] over n elements (n a multiple of the block size of both types);
// w_row in weight_type, act_row in vec_dot_type(weight_type). No alignment needed.
float vec_dot(DType weight_type, int64_t n, const void* w_row, const void* act_row);
float vec_dot_at(SimdLevel level, DType weight_type, int64_t n, const void* w_row, const void* act_row);

// Y[t * y_stride_floats + r] = vec_dot(wtype, n_in, W + r * w_stride_bytes,
//                                      A + t * a_stride_bytes)
// for r in [row_begin, row_end), t in [0, n_tok). W: weight rows of n_in elements of wtype;
// A: n_tok activation rows in vec_dot_type(wtype). Rows outside [row_begin, row_end) of Y
// are not touched, so threads may split the rows of one call.
void gemm(DType wtype, int64_t n_in, const void* W, size_t w_stride_bytes, int64_t row_begin, int64_t row_end,
          const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats);
void gemm_at(SimdLevel level, DType wtype, int64_t n_in, const void* W, size_t w_stride_bytes, int64_t row_begin,
             int64_t row_end, const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats);

}  // namespace hearth::cpu
