// How far a device backend's MatMul output may be from the CPU backend's, shared by the
// device tests of MatMul and of MatMulExperts (whose outputs are MatMul's).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/dtype.h"

namespace hearth::test {

inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// How far the Vulkan result of output (t, o) may be from the CPU's.
//
// Float weights (F32, F16, BF16): both backends multiply the dequantized weights with f32
// activations in f32 (the shaders keep 16-bit types for storage only), summing in
// different orders: the error is about sqrt(n) * 2^-24 * sum |w_i x_i| (n * 2^-24 at
// worst); 2e-6 of sum |w_i x_i| leaves a wide margin for any n here.
//
// Quantized weights: either backend may round the activations before the dot product -
// the CPU quantizes them to 8 bits per 32 or 256 elements (Q8_0/Q8_1/Q8_K: step amax/127
// of the block), a GPU may do the same or keep f32. Per element the two results then
// differ by at most d_i = one step, independently rounded, so the difference of the sums
// has standard deviation sqrt(sum (w_i d_i)^2 / 6); we allow 6 of those. On top of that
// each 8-bit block's f16 scale is rounded (relative 2^-11 on each side, correlated within
// the block: bounded by 1e-3 of sum |w_i x_i|). A wrong scale, element or block is an
// error of the order of the output itself, sqrt(n) times larger than this.
//
// tf32: the CUDA backend's tensor-core MatMul (HEARTH_CUDA_MATMUL=mma) rounds w and x to
// TF32 (10 mantissa bits, to nearest): each product within 2^-10 of the exact one, so the
// sum within 2^-10 < 1e-3 of sum |w_i x_i|, on top of the rest.
inline double matmul_tol(DType type, const float* w, const float* x, int64_t n, bool tf32) {
  double var = 0, abs_sum = 0;
  for (int64_t blk = 0; blk < n; blk += 256) {
    const int64_t end = std::min(n, blk + 256);
    float amax = 0;
    for (int64_t i = blk; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = blk; i < end; ++i) {
      const double d = amax / 127.0;
      var += (double(w[i]) * d) * (double(w[i]) * d) / 6;
      abs_sum += std::fabs(double(w[i]) * x[i]);
    }
  }
  const double rounding = tf32 ? 1e-3 * abs_sum : 0.0;
  if (is_float(type)) return 2e-6 * abs_sum + 1e-6 + rounding;
  return 6 * std::sqrt(var) + 1e-3 * abs_sum + 1e-5 + rounding;
}

}  // namespace hearth::test
