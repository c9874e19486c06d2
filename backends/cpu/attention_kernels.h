// The f32 inner loops of CPU attention, per SIMD level. Several heads and keys go through
// one call so that a key or value row loaded once serves them all and the independent sums
// overlap; each (head, key) pair and each output element still gets the same arithmetic
// however many share a call, which keeps attention independent of how a prompt was chunked
// or batched.
#pragma once

#include <cstdint>

#include "backends/cpu/vec_dot.h"

namespace hearth::cpu {

// Heads (or (query row, head) pairs) per call: a KV group of up to 8 heads (Qwen2.5 has 7)
// in one pass over its keys and values.
inline constexpr int kAttnMaxGroup = 8;

struct AttnKernels {
  // out[h][j] = q[h] . k_j over n floats, for h < n_heads (1 .. kAttnMaxGroup) and j < n_j.
  // Element d of k_j is k[j * k_stride + d], or k[d * k_stride + j] when k_transposed (keys
  // side by side, so 16 keys' products with one q element are one vector operation). Each
  // product is the same sum in the same order over d whatever n_heads, n_j or the position
  // of k_j in the call, so keys may be split between calls at will.
  void (*qk)(const float* const* q, int n_heads, const float* k, int64_t k_stride, int64_t n_j, int64_t n,
             float* const* out);
  bool k_transposed;
  // With k_transposed: kt[c * kt_stride + i] = rows[i * width + c] for i < n_rows (<= 16),
  // c < width: a block of staged key rows written as columns.
  void (*transpose_rows)(const float* rows, int64_t n_rows, int64_t width, float* kt, int64_t kt_stride);
  // The same straight from f16 key rows (the cache's type): kt[c * kt_stride + i] =
  // float(rows[i][c]), each an exact conversion, so it equals converting then transposing
  // bit for bit. Null where the level has none (the caller converts, then transposes).
  void (*transpose_f16_rows)(const uint16_t* const* rows, int64_t n_rows, int64_t width, float* kt, int64_t kt_stride);
  // The same from Q8_0 key rows (blocks of an f16 scale d and 32 int8 q; width a multiple
  // of 32): d * q is exact in f32, so this too equals dequantizing then transposing bit for
  // bit. Null where the level has none.
  void (*transpose_q8_0_rows)(const uint8_t* const* rows, int64_t n_rows, int64_t width, float* kt, int64_t kt_stride);
  // qk over keys read in place, with the arithmetic of qk on those keys converted and
  // transposed (the same bits): key j's element d is float(k[j][col + d]) (f16), or the
  // dequantized element col + d of Q8_0 row k[j]; n and col multiples of 16 (the AVX-512 level
  // reads 16 elements of a block at a time). No staged copy,
  // but each call converts and transposes its keys again: for calls that each read keys no
  // other call reads (one query row). Null where the level has none.
  void (*qk_f16_rows)(const float* const* q, int n_heads, const uint16_t* const* k, int64_t col, int64_t n_j, int64_t n,
                      float* const* out);
  void (*qk_q8_0_rows)(const float* const* q, int n_heads, const uint8_t* const* k, int64_t col, int64_t n_j, int64_t n,
                       float* const* out);
  // For h < n_heads (1 .. kAttnMaxGroup): out[h][i] = sum over j < n_j, in increasing j, of
  // w[h][j] * v[j * v_stride + i], for i < n; out[h] is overwritten, or with accumulate the
  // sums start from out[h]'s values instead of 0. Each element is one chain of
  // acc = acc + w * v (fma at the SIMD levels) in increasing j, kept in a float whether in a
  // register or in out, so summing keys [0, a) and then accumulating [a, n_j) gives the
  // same bits as one call over [0, n_j).
  void (*weighted_sum)(float* const* out, const float* const* w, int n_heads, const float* v, int64_t v_stride,
                       int64_t n_j, int64_t n, bool accumulate);
  // The same reading f16 value rows in place: element i of value j is float(v[j][col + i])
  // (an exact conversion), so it equals weighted_sum over converted rows bit for bit. Null
  // where the level has none (the caller converts the rows first).
  void (*weighted_sum_f16)(float* const* out, const float* const* w, int n_heads, const uint16_t* const* v, int64_t col,
                           int64_t n_j, int64_t n, bool accumulate);
  // The same reading Q8_0 value rows in place (element i of value j is the dequantized
  // element col + i of row v[j], exact), equal to weighted_sum over dequantized rows bit for
  // bit. Null where the level has none.
  void (*weighted_sum_q8_0)(float* const* out, const float* const* w, int n_heads, const uint8_t* const* v, int64_t col,
                            int64_t n_j, int64_t n, bool accumulate);
  // The in-place value kernels convert inside their fma loops (AVX-512), so every call may
  // read values in place at no extra cost; false: they convert each row into a buffer first
  // (an extra pass per call), worth it only where no other call reads the row (one query row).
  bool values_in_place_fused;
  // s[j] = f * s[j] for j < n (each product exact float multiplication: same bits at every
  // level); scale_max also returns max(-inf, s[0..n)) after scaling (NaNs ignored).
  float (*scale_max)(float* s, int64_t n, float f);
  void (*scale)(float* s, int64_t n, float f);
  // s[j] = exp(s[j] - max) for j < n; returns their sum, accumulated in double. The scalar
  // level uses std::exp and sums in order; AVX-512 a vector exp (within 2 ulp of expf) and
  // 16 lane sums, so levels differ in the last bits, but each is the same for a row
  // however its prompt was batched.
  double (*exp_sum)(float* s, int64_t n, float max);
};

AttnKernels attn_kernels(SimdLevel level);

}  // namespace hearth::cpu
