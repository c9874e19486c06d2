// Small helpers shared by the CUDA kernels: warp reductions, IEEE half conversions, the
// Q8_0 quantizer's arithmetic, and byte-strided row addressing. The pure-math functions are
// __host__ __device__ so a host test (tests/backend/cuda_host_math_test.cu) can hold them
// to the CPU backend's bit for bit: common/fp16.h and cpu::quantize_row.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hearth::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarp = 32;

// --- warp reductions -----------------------------------------------------------------------
// Butterfly (xor) reductions: every lane ends with the same result, and the order of the
// additions depends only on the lane, so a reduction is deterministic run to run.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// fmaxf skips a NaN operand, as std::max(m, x) in the CPU's reductions does when m is not NaN.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// --- bit casts -----------------------------------------------------------------------------
__host__ __device__ inline uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
#endif
}

__host__ __device__ inline float f32_from_bits(uint32_t w) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(w);
#else
  float f;
  std::memcpy(&f, &w, 4);
  return f;
#endif
}

// --- IEEE half -----------------------------------------------------------------------------
// float -> half bits, round to nearest even, written with integer operations only so that
// every input (NaN payloads included) gives the bits common/fp16.h's fp32_to_fp16 gives on
// the CPU; the hardware conversion would make every NaN the canonical 0x7fff. The KV store
// is memory bound, so the few integer operations cost nothing.
__host__ __device__ inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf stays inf; NaN keeps its top payload bits and stays quiet
    const uint32_t nan = x > 0x7f800000u ? (0x200u | ((x >> 13) & 0x3ffu)) : 0u;
    return static_cast<uint16_t>(sign | 0x7c00u | nan);
  }
  // 0x477ff000 = 65520: the first float that rounds past the largest half (65504).
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (x < 0x38800000u) {  // below 2^-14: the half is subnormal or zero
    // Below 2^-25 (half the smallest subnormal 2^-24) everything rounds to zero.
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);
    // Shift the 24-bit significand so its unit is 2^-24, rounding the dropped bits to even.
    const uint32_t exp = x >> 23;
    const uint32_t sig = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 .. 24
    uint32_t h = sig >> shift;
    const uint32_t dropped = sig & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (dropped > halfway || (dropped == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and keep 10 of 23 mantissa bits; a carry out of
  // the mantissa when rounding up correctly bumps the exponent.
  uint32_t h = (x >> 13) - (112u << 10);
  const uint32_t dropped = x & 0x1fffu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// half bits -> float, exact for every input. On the device the hardware conversion (exact
// for all finite and infinite values); on the host the same by construction.
__host__ __device__ inline float f16_bits_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

// x rounded to the nearest half and back (round to nearest even).
__device__ __forceinline__ float round_through_f16(float x) {
  return __half2float(__float2half_rn(x));
}

// --- Q8_0 ------------------------------------------------------------------------------------
// A Q8_0 block: 32 elements as an f16 scale d (2 bytes, little endian) then 32 int8 q;
// element i = d * q[i]. The quantizer is ggml's reference, as cpu::quantize_row computes it:
//   amax = max |x_i|, d = amax / 127, q_i = round(x_i / d) (half away from zero, via the
//   float reciprocal id = 1 / d, or 0 when d is 0); the stored scale is d rounded to f16.
inline constexpr int kQ8Block = 32;
inline constexpr int kQ8BlockBytes = 34;

// One step of the CPU's running maximum amax = std::max(amax, |x|) (amax starts at 0): a
// NaN |x| is skipped. Order-independent for non-NaN values, so a warp tree gives the same.
__host__ __device__ inline float q8_0_amax_step(float amax, float x) {
  const float a = fabsf(x);
  return amax < a ? a : amax;
}

struct Q8Scale {
  float d;   // the exact f32 scale (stored rounded to f16)
  float id;  // 1 / d, or 0 for an all-zero block
};

__host__ __device__ inline Q8Scale q8_0_scale(float amax) {
  const float d = amax / 127.0f;
  return {d, d != 0.0f ? 1.0f / d : 0.0f};
}

__host__ __device__ inline int8_t q8_0_quant(float x, float id) {
  // roundf rounds half away from zero, as std::round; |x * id| <= 127 (up to rounding of id).
  return static_cast<int8_t>(static_cast<int>(roundf(x * id)));
}

// A whole row (n a multiple of 32) into n / 32 blocks at dst; the scalar form of the warp
// kernel in cu_attention.cu, kept for the host test.
__host__ __device__ inline void quantize_row_q8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    uint8_t* out = dst + b * kQ8BlockBytes;
    float amax = 0.0f;
    for (int i = 0; i < kQ8Block; ++i) amax = q8_0_amax_step(amax, xb[i]);
    const Q8Scale s = q8_0_scale(amax);
    const uint16_t dh = f32_to_f16_bits(s.d);
    out[0] = static_cast<uint8_t>(dh & 0xffu);
    out[1] = static_cast<uint8_t>(dh >> 8);
    for (int i = 0; i < kQ8Block; ++i) out[2 + i] = static_cast<uint8_t>(q8_0_quant(xb[i], s.id));
  }
}

// --- RoPE angle ------------------------------------------------------------------------------
// theta_j = pos * pos_scale * ratio^j with ratio = base^(-2 / n_rot) computed once on the
// host by rope_theta_ratio (backends/rope_math.h), multiplied up one float product at a
// time in the CPU's order, so the angles equal the CPU's bit for bit.
__host__ __device__ inline float rope_theta(int32_t pos, float pos_scale, float ratio, int j) {
  float theta = static_cast<float>(pos) * pos_scale;
  for (int k = 0; k < j; ++k) theta *= ratio;
  return theta;
}

// --- gelu ------------------------------------------------------------------------------------
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), evaluated as the CPU's
// float expression: left to right, each product and sum rounded (no fused multiply-add, which
// nvcc would otherwise form), so only tanhf's last bits can differ from the CPU.
__device__ __forceinline__ float gelu_tanh_unfused(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoef = 0.044715f;
  const float inner = __fmul_rn(__fmul_rn(kSqrt2OverPi, x), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(kCoef, x), x)));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
}

// The CPU backend's GeluMul activation: gelu of x rounded to f16, rounded to f16 (its
// 64 Ki-entry table indexed by the f16 bits of x), and 0 / x outside (-10, 10).
__device__ __forceinline__ float gelu_f16_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return round_through_f16(gelu_tanh_unfused(round_through_f16(x)));
}

// --- addressing --------------------------------------------------------------------------
// Row r of a byte-strided view, as T*.
template <class T>
__device__ __forceinline__ T* row_ptr(void* base, int64_t r, size_t stride) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + static_cast<size_t>(r) * stride);
}
template <class T>
__device__ __forceinline__ const T* row_ptr(const void* base, int64_t r, size_t stride) {
  return reinterpret_cast<const T*>(static_cast<const char*>(base) + static_cast<size_t>(r) * stride);
}

// Blocks needed for n items of `per` each, at least 1 (callers skip n == 0 before).
inline unsigned div_up_u(int64_t n, int64_t per) {
  return static_cast<unsigned>((n + per - 1) / per);
}

// The y dimension of a grid is limited to 65535 blocks; kernels loop over the rest.
inline constexpr int64_t kMaxGridY = 65535;

}  // namespace hearth::cuda
