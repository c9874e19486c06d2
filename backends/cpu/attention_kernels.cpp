#include "backends/cpu/attention_kernels.h"

#include <algorithm>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hearth::cpu {
namespace {

float dot_scalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_scalar(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float scale_max_scalar(float* s, int64_t n, float f) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    s[j] = f * s[j];
    m = std::max(m, s[j]);
  }
  return m;
}

void scale_scalar(float* s, int64_t n, float f) {
  for (int64_t j = 0; j < n; ++j) s[j] = f * s[j];
}

// One pair or head at a time, with the single-row kernels of a level.
template <float (*kDot)(const float*, const float*, int64_t)>
void qk_each(const float* const* q, int n_heads, const float* k, int64_t k_stride, int64_t n_j, int64_t n,
             float* const* out) {
  for (int64_t j = 0; j < n_j; ++j)
    for (int h = 0; h < n_heads; ++h) out[h][j] = kDot(q[h], k + j * k_stride, n);
}

template <void (*kAxpy)(float*, float, const float*, int64_t)>
void weighted_sum_each(float* const* out, const float* const* w, int n_heads, const float* v, int64_t v_stride,
                       int64_t n_j, int64_t n) {
  for (int h = 0; h < n_heads; ++h) {
    std::fill(out[h], out[h] + n, 0.0f);
    for (int64_t j = 0; j < n_j; ++j) kAxpy(out[h], w[h][j], v + j * v_stride, n);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  float s = _mm_cvtss_f32(s4);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float* y, float a, const float* x, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

#define HEARTH_AVX512 __attribute__((target("avx512f,avx512dq"), always_inline)) inline

HEARTH_AVX512 __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// Sum of the 16 lanes: halves, then quarters, then (l0 + l1) + (l2 + l3) by hadd.
HEARTH_AVX512 __m128 quarter_sum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xFF, v, 0), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
  return _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
}

// H heads x 4 keys in registers: per pair one accumulator over the 16-float slices in
// order (the last one zero-padded), then quarter_sum and a hadd tree. Keys past n_j repeat
// the last one and are not stored.
template <int H>
HEARTH_AVX512 void qk_avx512_n(const float* const* q, const float* k, int64_t k_stride, int64_t n_j, int64_t n,
                               float* const* out) {
  constexpr int J = 4;
  for (int64_t j0 = 0; j0 < n_j; j0 += J) {
    const float* kj[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) kj[j] = k + std::min(j0 + j, n_j - 1) * k_stride;
    __m512 acc[H][J];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[h][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      __m512 kv[J];
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) kv[j] = _mm512_maskz_loadu_ps(m, kj[j] + i);
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, q[h] + i);
#pragma GCC unroll 16
        for (int j = 0; j < J; ++j) acc[h][j] = _mm512_fmadd_ps(qv, kv[j], acc[h][j]);
      }
    }
    const int64_t live = std::min<int64_t>(J, n_j - j0);
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h) {
      const __m128 s = _mm_hadd_ps(_mm_hadd_ps(quarter_sum(acc[h][0]), quarter_sum(acc[h][1])),
                                   _mm_hadd_ps(quarter_sum(acc[h][2]), quarter_sum(acc[h][3])));
      alignas(16) float r[J];
      _mm_store_ps(r, s);
      for (int64_t j = 0; j < live; ++j) out[h][j0 + j] = r[j];
    }
  }
}

__attribute__((target("avx512f,avx512dq"))) void qk_avx512(const float* const* q, int n_heads, const float* k,
                                                           int64_t k_stride, int64_t n_j, int64_t n,
                                                           float* const* out) {
  switch (n_heads) {
    case 1:
      qk_avx512_n<1>(q, k, k_stride, n_j, n, out);
      break;
    case 2:
      qk_avx512_n<2>(q, k, k_stride, n_j, n, out);
      break;
    case 3:
      qk_avx512_n<3>(q, k, k_stride, n_j, n, out);
      break;
    default:
      qk_avx512_n<4>(q, k, k_stride, n_j, n, out);
      break;
  }
}

// H heads x 64 output floats in registers while every value row passes once; per element a
// chain of fmas from 0 in increasing j.
template <int H>
HEARTH_AVX512 void weighted_sum_avx512_n(float* const* out, const float* const* w, const float* v, int64_t v_stride,
                                         int64_t n_j, int64_t n) {
  constexpr int kVecs = 4;
  for (int64_t i = 0; i < n; i += 16 * kVecs) {
    __mmask16 m[kVecs];
#pragma GCC unroll 16
    for (int k = 0; k < kVecs; ++k) m[k] = i + 16 * k < n ? tail_mask(n - i - 16 * k) : static_cast<__mmask16>(0);
    __m512 acc[H][kVecs];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n_j; ++j) {
      const float* vj = v + j * v_stride + i;
      __m512 x[kVecs];
#pragma GCC unroll 16
      for (int k = 0; k < kVecs; ++k) x[k] = _mm512_maskz_loadu_ps(m[k], vj + 16 * k);
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h) {
        const __m512 wj = _mm512_set1_ps(w[h][j]);
#pragma GCC unroll 16
        for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm512_fmadd_ps(wj, x[k], acc[h][k]);
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int k = 0; k < kVecs; ++k) _mm512_mask_storeu_ps(out[h] + i + 16 * k, m[k], acc[h][k]);
  }
}

// Multiplications are elementwise and the maximum does not depend on the order (NaNs are
// skipped, as std::max(m, x) skips them; a +0 / -0 tie gives the same exp(s - max)), so
// these equal the scalar loops bit for bit.
__attribute__((target("avx512f,avx512dq"))) float scale_max_avx512(float* s, int64_t n, float f) {
  const __m512 vf = _mm512_set1_ps(f);
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = tail_mask(n - j);
    const __m512 x = _mm512_mul_ps(vf, _mm512_maskz_loadu_ps(k, s + j));
    _mm512_mask_storeu_ps(s + j, k, x);
    m = _mm512_mask_max_ps(m, k, x, m);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float r = lanes[0];
  for (int i = 1; i < 16; ++i) r = std::max(r, lanes[i]);
  return r;
}

__attribute__((target("avx512f,avx512dq"))) void scale_avx512(float* s, int64_t n, float f) {
  const __m512 vf = _mm512_set1_ps(f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = tail_mask(n - j);
    _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(vf, _mm512_maskz_loadu_ps(k, s + j)));
  }
}

__attribute__((target("avx512f,avx512dq"))) void weighted_sum_avx512(float* const* out, const float* const* w,
                                                                     int n_heads, const float* v, int64_t v_stride,
                                                                     int64_t n_j, int64_t n) {
  switch (n_heads) {
    case 1:
      weighted_sum_avx512_n<1>(out, w, v, v_stride, n_j, n);
      break;
    case 2:
      weighted_sum_avx512_n<2>(out, w, v, v_stride, n_j, n);
      break;
    case 3:
      weighted_sum_avx512_n<3>(out, w, v, v_stride, n_j, n);
      break;
    default:
      weighted_sum_avx512_n<4>(out, w, v, v_stride, n_j, n);
      break;
  }
}
#endif

}  // namespace

AttnKernels attn_kernels(SimdLevel level) {
#if defined(__x86_64__)
  if (level >= SimdLevel::AVX512) return {qk_avx512, weighted_sum_avx512, scale_max_avx512, scale_avx512};
  if (level >= SimdLevel::AVX2)
    return {qk_each<dot_avx2>, weighted_sum_each<axpy_avx2>, scale_max_scalar, scale_scalar};
#else
  (void)level;
#endif
  return {qk_each<dot_scalar>, weighted_sum_each<axpy_scalar>, scale_max_scalar, scale_scalar};
}

}  // namespace hearth::cpu
