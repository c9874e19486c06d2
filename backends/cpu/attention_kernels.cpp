#include "backends/cpu/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/f16_convert.h"
#include "common/fp16.h"

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

double exp_sum_scalar(float* s, int64_t n, float max) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - max);
    sum += s[j];
  }
  return sum;
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
                       int64_t n_j, int64_t n, bool accumulate) {
  for (int h = 0; h < n_heads; ++h) {
    if (!accumulate) std::fill(out[h], out[h] + n, 0.0f);
    for (int64_t j = 0; j < n_j; ++j) kAxpy(out[h], w[h][j], v + j * v_stride, n);
  }
}

// Keys and values read in place at the levels without a transposing kernel: each row's n
// elements from col converted (exactly) into a buffer that stays in L1, then the level's own
// dot or axpy, so the arithmetic is that of rows staged whole. f16 or Q8_0 rows.
void f16_part(const uint16_t* row, int64_t col, int64_t n, float* dst) {
  f16_to_f32_row(row + col, dst, n);
}
void q8_0_part(const uint8_t* row, int64_t col, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* blk = row + (col + i) / 32 * 34;
    uint16_t d;
    std::memcpy(&d, blk, 2);
    dst[i] = static_cast<float>(static_cast<int8_t>(blk[2 + (col + i) % 32])) * fp16_to_fp32(d);  // exact
  }
}

std::vector<float>& row_part(int64_t n) {
  thread_local std::vector<float> part;
  if (static_cast<int64_t>(part.size()) < n) part.resize(static_cast<size_t>(n));
  return part;
}

template <float (*kDot)(const float*, const float*, int64_t), class Row,
          void (*kPart)(const Row*, int64_t, int64_t, float*)>
void qk_rows_each(const float* const* q, int n_heads, const Row* const* k, int64_t col, int64_t n_j, int64_t n,
                  float* const* out) {
  float* part = row_part(n).data();
  for (int64_t j = 0; j < n_j; ++j) {
    kPart(k[j], col, n, part);
    for (int h = 0; h < n_heads; ++h) out[h][j] = kDot(q[h], part, n);
  }
}

template <void (*kAxpy)(float*, float, const float*, int64_t), class Row,
          void (*kPart)(const Row*, int64_t, int64_t, float*)>
void weighted_sum_rows_each(float* const* out, const float* const* w, int n_heads, const Row* const* v, int64_t col,
                            int64_t n_j, int64_t n, bool accumulate) {
  if (!accumulate)
    for (int h = 0; h < n_heads; ++h) std::fill(out[h], out[h] + n, 0.0f);
  float* part = row_part(n).data();
  for (int64_t j = 0; j < n_j; ++j) {
    kPart(v[j], col, n, part);
    for (int h = 0; h < n_heads; ++h) kAxpy(out[h], w[h][j], part, n);
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

// Keys transposed: H heads x J blocks of 16 keys in registers, one fma per head, block and
// head element, d in increasing order from 0 (each score one chain, whatever the block).
// Keys past n_j are masked off.
template <int H, int J>
HEARTH_AVX512 void qk_avx512_n(const float* const* q, const float* kt, int64_t d_stride, int64_t n_j, int64_t n,
                               float* const* out) {
  for (int64_t j0 = 0; j0 < n_j; j0 += 16 * J) {
    __mmask16 m[J];
#pragma GCC unroll 16
    for (int b = 0; b < J; ++b) m[b] = j0 + 16 * b < n_j ? tail_mask(n_j - j0 - 16 * b) : static_cast<__mmask16>(0);
    __m512 acc[H][J];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int b = 0; b < J; ++b) acc[h][b] = _mm512_setzero_ps();
    for (int64_t d = 0; d < n; ++d) {
      const float* row = kt + d * d_stride + j0;
      __m512 kv[J];
#pragma GCC unroll 16
      for (int b = 0; b < J; ++b) kv[b] = _mm512_maskz_loadu_ps(m[b], row + 16 * b);
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h) {
        const __m512 qd = _mm512_set1_ps(q[h][d]);
#pragma GCC unroll 16
        for (int b = 0; b < J; ++b) acc[h][b] = _mm512_fmadd_ps(qd, kv[b], acc[h][b]);
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int b = 0; b < J; ++b) _mm512_mask_storeu_ps(out[h] + j0 + 16 * b, m[b], acc[h][b]);
  }
}

// Column c of the block: one masked gather of its n_rows elements (all in L1).
__attribute__((target("avx512f,avx512dq"))) void transpose_rows_avx512(const float* rows, int64_t n_rows, int64_t width,
                                                                       float* kt, int64_t kt_stride) {
  const __mmask16 m = tail_mask(n_rows);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int>(width)));
  for (int64_t c = 0; c < width; ++c)
    _mm512_mask_storeu_ps(kt + c * kt_stride, m, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, rows + c, 4));
}

// 16 rows of 16 floats in r[i] to 16 columns in r[c] (lane i = row i): pairs of rows
// interleaved by dwords, then by qwords, inside each 128-bit lane (u[4k + j], lane L: rows
// 4k..4k+3 of column 4L + j), then the 128-bit lanes gathered across the four row groups.
HEARTH_AVX512 void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * k + 2]), d = _mm512_castps_pd(t[4 * k + 3]);
    u[4 * k + 0] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a, c));
    u[4 * k + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a, c));
    u[4 * k + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, b, d));
    u[4 * k + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, b, d));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 x0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[j], u[4 + j], 0x44),
                 x1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[j], u[4 + j], 0xEE);
    const __m512 y0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + j], u[12 + j], 0x44);
    const __m512 y1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_maskz_shuffle_f32x4(0xFFFF, x0, y0, 0x88);
    r[4 + j] = _mm512_maskz_shuffle_f32x4(0xFFFF, x0, y0, 0xDD);
    r[8 + j] = _mm512_maskz_shuffle_f32x4(0xFFFF, x1, y1, 0x88);
    r[12 + j] = _mm512_maskz_shuffle_f32x4(0xFFFF, x1, y1, 0xDD);
  }
}

// 16 columns at a time: 16 f16 rows converted (vcvtph2ps, exact) and transposed in
// registers; rows past n_rows are zeros that the masked stores leave out. A last partial
// block of columns goes one element at a time.
__attribute__((target("avx512f,avx512dq"))) void transpose_f16_rows_avx512(const uint16_t* const* rows, int64_t n_rows,
                                                                           int64_t width, float* kt,
                                                                           int64_t kt_stride) {
  const __mmask16 m = tail_mask(n_rows);
  int64_t c0 = 0;
  for (; c0 + 16 <= width; c0 += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = i < n_rows
                 ? _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + c0)))
                 : _mm512_setzero_ps();
    transpose16(r);
    for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(kt + (c0 + c) * kt_stride, m, r[c]);
  }
  for (; c0 < width; ++c0)
    for (int64_t i = 0; i < n_rows; ++i) kt[c0 * kt_stride + i] = fp16_to_fp32(rows[i][c0]);
}

// 16 elements of a Q8_0 row from element e (a multiple of 16, so inside one block of 32):
// d * q, each product exact in f32, as dequantize_row computes them.
HEARTH_AVX512 __m512 q8_0_16(const uint8_t* row, int64_t e) {
  const uint8_t* blk = row + (e / 32) * 34;
  uint16_t d;
  std::memcpy(&d, blk, 2);
  // maskz forms: GCC 12 warns about the undefined source of the unmasked ones.
  const __m512i q =
      _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + e % 32)));
  return _mm512_mul_ps(_mm512_set1_ps(fp16_to_fp32(d)), _mm512_maskz_cvtepi32_ps(0xFFFF, q));
}

// As transpose_f16_rows_avx512, from Q8_0 rows (width a multiple of 32).
__attribute__((target("avx512f,avx512dq"))) void transpose_q8_0_rows_avx512(const uint8_t* const* rows, int64_t n_rows,
                                                                            int64_t width, float* kt,
                                                                            int64_t kt_stride) {
  const __mmask16 m = tail_mask(n_rows);
  for (int64_t c0 = 0; c0 < width; c0 += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = i < n_rows ? q8_0_16(rows[i], c0) : _mm512_setzero_ps();
    transpose16(r);
    for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(kt + (c0 + c) * kt_stride, m, r[c]);
  }
}

// H heads x J blocks of 16 keys, 8 to 16 independent chains of fmas; fewer for one or two
// heads, whose 4 blocks (64 keys a step) drop to 2 for calls of 32 keys or fewer, which
// would leave half of them masked off.
__attribute__((target("avx512f,avx512dq"))) void qk_avx512(const float* const* q, int n_heads, const float* kt,
                                                           int64_t d_stride, int64_t n_j, int64_t n,
                                                           float* const* out) {
  switch (n_heads) {
    case 1:
      if (n_j > 32) {
        qk_avx512_n<1, 4>(q, kt, d_stride, n_j, n, out);
      } else {
        qk_avx512_n<1, 2>(q, kt, d_stride, n_j, n, out);
      }
      break;
    case 2:
      if (n_j > 32) {
        qk_avx512_n<2, 4>(q, kt, d_stride, n_j, n, out);
      } else {
        qk_avx512_n<2, 2>(q, kt, d_stride, n_j, n, out);
      }
      break;
    case 3:
      qk_avx512_n<3, 2>(q, kt, d_stride, n_j, n, out);
      break;
    case 4:
      qk_avx512_n<4, 2>(q, kt, d_stride, n_j, n, out);
      break;
    case 5:
      qk_avx512_n<5, 2>(q, kt, d_stride, n_j, n, out);
      break;
    case 6:
      qk_avx512_n<6, 2>(q, kt, d_stride, n_j, n, out);
      break;
    case 7:
      qk_avx512_n<7, 2>(q, kt, d_stride, n_j, n, out);
      break;
    default:
      qk_avx512_n<8, 2>(q, kt, d_stride, n_j, n, out);
      break;
  }
}

// Asks for the lines of [p, p + bytes) to be brought into L1 ahead of their use.
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
  _mm_prefetch(c + bytes - 1, _MM_HINT_T0);
}

// Keys read in place (f16 or Q8_0 rows, element col + d of row j): 16 keys at a time, 16 of
// their elements converted (exactly) and transposed in registers, then one fma per head
// and element, d in increasing order from 0, each score one chain: the arithmetic of
// qk_avx512_n over the same keys converted and staged, bit for bit, with no staged copy.
// J blocks of 16 keys go side by side so that H x J chains overlap. Row16: 16 elements of
// key row i from element e (a multiple of 16).
template <int H, int J, class Row16>
HEARTH_AVX512 void qk_rows_avx512_n(const float* const* q, int64_t n_j, int64_t n, float* const* out, Row16 row16) {
  for (int64_t j = 0; j < std::min<int64_t>(n_j, 16 * J); ++j) row16.prefetch(j, n);
  for (int64_t j0 = 0; j0 < n_j; j0 += 16 * J) {
    for (int64_t j = j0 + 16 * J; j < std::min<int64_t>(n_j, j0 + 32 * J); ++j) row16.prefetch(j, n);
    __m512 acc[H][J];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int b = 0; b < J; ++b) acc[h][b] = _mm512_setzero_ps();
    for (int64_t d0 = 0; d0 < n; d0 += 16) {
#pragma GCC unroll 16
      for (int b = 0; b < J; ++b) {
        const int64_t first = j0 + 16 * b;
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = first + i < n_j ? row16(first + i, d0) : _mm512_setzero_ps();
        transpose16(r);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c)
#pragma GCC unroll 16
          for (int h = 0; h < H; ++h) acc[h][b] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d0 + c]), r[c], acc[h][b]);
      }
    }
#pragma GCC unroll 16
    for (int b = 0; b < J; ++b) {
      const int64_t first = j0 + 16 * b;
      const __mmask16 m = first < n_j ? tail_mask(n_j - first) : static_cast<__mmask16>(0);
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h) _mm512_mask_storeu_ps(out[h] + first, m, acc[h][b]);
    }
  }
}

// 1 to 8 heads: two blocks of keys side by side for up to 4 heads, one for more (the 16
// transposed elements and H x J sums stay within the 32 registers).
template <class Row16>
HEARTH_AVX512 void qk_rows_heads(const float* const* q, int n_heads, int64_t n_j, int64_t n, float* const* out,
                                 Row16 row16) {
  switch (n_heads) {
    case 1:
      return qk_rows_avx512_n<1, 2>(q, n_j, n, out, row16);
    case 2:
      return qk_rows_avx512_n<2, 2>(q, n_j, n, out, row16);
    case 3:
      return qk_rows_avx512_n<3, 2>(q, n_j, n, out, row16);
    case 4:
      return qk_rows_avx512_n<4, 2>(q, n_j, n, out, row16);
    case 5:
      return qk_rows_avx512_n<5, 1>(q, n_j, n, out, row16);
    case 6:
      return qk_rows_avx512_n<6, 1>(q, n_j, n, out, row16);
    case 7:
      return qk_rows_avx512_n<7, 1>(q, n_j, n, out, row16);
    default:
      return qk_rows_avx512_n<8, 1>(q, n_j, n, out, row16);
  }
}

// Key loaders for qk_rows_heads: 16 elements of key row j from element e.
struct F16Key {
  const uint16_t* const* k;
  int64_t col;
  HEARTH_AVX512 __m512 operator()(int64_t j, int64_t e) const {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[j] + col + e)));
  }
  void prefetch(int64_t j, int64_t n) const { prefetch_bytes(k[j] + col, n * 2); }
};
struct Q8_0Key {
  const uint8_t* const* k;
  int64_t col;
  HEARTH_AVX512 __m512 operator()(int64_t j, int64_t e) const { return q8_0_16(k[j], col + e); }
  void prefetch(int64_t j, int64_t n) const { prefetch_bytes(k[j] + col / 32 * 34, (n + 31) / 32 * 34); }
};

__attribute__((target("avx512f,avx512dq"))) void qk_f16_rows_avx512(const float* const* q, int n_heads,
                                                                    const uint16_t* const* k, int64_t col, int64_t n_j,
                                                                    int64_t n, float* const* out) {
  qk_rows_heads(q, n_heads, n_j, n, out, F16Key{k, col});
}

__attribute__((target("avx512f,avx512dq"))) void qk_q8_0_rows_avx512(const float* const* q, int n_heads,
                                                                     const uint8_t* const* k, int64_t col, int64_t n_j,
                                                                     int64_t n, float* const* out) {
  qk_rows_heads(q, n_heads, n_j, n, out, Q8_0Key{k, col});
}

// Value rows per block of the weighted sums: every column chunk of a block's rows is summed
// before the next block, so the rows (32 x 512 bytes for Gemma 3's 256 f16) are read from
// memory once and then from L1; the next block's rows are prefetched meanwhile. Going
// through all of a call's rows once per column chunk read each row from memory up to four
// times, one or two lines at a stride of a row: at a 4,096-token context that made the
// weighted sums most of a decode step's attention.
constexpr int64_t kValueBlock = 32;

// H heads x 64 output floats (32 from 7 heads, to stay within the 32 registers) in
// registers while the value rows of a block pass once; per element a chain of fmas in
// increasing j from 0, or from out with accumulate (or after the first block: the chain
// goes on from the float it was stored as, the same bits). Row j's 16 floats at i: load(j,
// i, mask). acc[h][k] += w[h][j] * (row j's 16 floats at i + 16 k) for j in [j0, j1), in
// increasing j; with kFull every lane of the kVecs vectors is in the row (no masks).
template <int H, int kVecs, bool kFull, class Load>
HEARTH_AVX512 void weighted_sum_rows(__m512 (&acc)[H][kVecs], const float* const* w, int64_t j0, int64_t j1, int64_t i,
                                     const __mmask16* m, Load load) {
  for (int64_t j = j0; j < j1; ++j) {
    __m512 x[kVecs];
#pragma GCC unroll 16
    for (int k = 0; k < kVecs; ++k) x[k] = kFull ? load.full(j, i + 16 * k) : load(j, i + 16 * k, m[k]);
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h) {
      const __m512 wj = _mm512_set1_ps(w[h][j]);
#pragma GCC unroll 16
      for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm512_fmadd_ps(wj, x[k], acc[h][k]);
    }
  }
}

template <int H, class Load>
HEARTH_AVX512 void weighted_sum_avx512_n(float* const* out, const float* const* w, int64_t n_j, int64_t n,
                                         bool accumulate, Load load) {
  constexpr int kVecs = H <= 6 ? 4 : 2;
  for (int64_t j = 0; j < std::min(n_j, kValueBlock); ++j) load.prefetch(j, n);
  for (int64_t j0 = 0; j0 < n_j || (j0 == 0 && !accumulate); j0 += kValueBlock) {
    const int64_t j1 = std::min(n_j, j0 + kValueBlock);
    for (int64_t j = j1; j < std::min(n_j, j1 + kValueBlock); ++j) load.prefetch(j, n);
    const bool from_out = accumulate || j0 > 0;
    for (int64_t i = 0; i < n; i += 16 * kVecs) {
      __mmask16 m[kVecs];
#pragma GCC unroll 16
      for (int k = 0; k < kVecs; ++k) m[k] = i + 16 * k < n ? tail_mask(n - i - 16 * k) : static_cast<__mmask16>(0);
      __m512 acc[H][kVecs];
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
        for (int k = 0; k < kVecs; ++k)
          acc[h][k] = from_out ? _mm512_maskz_loadu_ps(m[k], out[h] + i + 16 * k) : _mm512_setzero_ps();
      if (i + 16 * kVecs <= n && load.full_ok()) {
        weighted_sum_rows<H, kVecs, true>(acc, w, j0, j1, i, m, load);
      } else {
        weighted_sum_rows<H, kVecs, false>(acc, w, j0, j1, i, m, load);
      }
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
        for (int k = 0; k < kVecs; ++k) _mm512_mask_storeu_ps(out[h] + i + 16 * k, m[k], acc[h][k]);
    }
  }
}

// 1 to 8 heads: weighted_sum_avx512_n<H> with the given row loader.
template <class Load>
HEARTH_AVX512 void weighted_sum_heads(float* const* out, const float* const* w, int n_heads, int64_t n_j, int64_t n,
                                      bool accumulate, Load load) {
  switch (n_heads) {
    case 1:
      weighted_sum_avx512_n<1>(out, w, n_j, n, accumulate, load);
      break;
    case 2:
      weighted_sum_avx512_n<2>(out, w, n_j, n, accumulate, load);
      break;
    case 3:
      weighted_sum_avx512_n<3>(out, w, n_j, n, accumulate, load);
      break;
    case 4:
      weighted_sum_avx512_n<4>(out, w, n_j, n, accumulate, load);
      break;
    case 5:
      weighted_sum_avx512_n<5>(out, w, n_j, n, accumulate, load);
      break;
    case 6:
      weighted_sum_avx512_n<6>(out, w, n_j, n, accumulate, load);
      break;
    case 7:
      weighted_sum_avx512_n<7>(out, w, n_j, n, accumulate, load);
      break;
    default:
      weighted_sum_avx512_n<8>(out, w, n_j, n, accumulate, load);
      break;
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

// exp(x) for x <= 0 (the softmax's s - max), NaN kept: x = k ln2 + r with |r| <= ln2 / 2
// (ln2 split in two so k ln2 is exact), exp(r) by Cephes' degree-7 polynomial for expf,
// then scaled by 2^k (vscalefps: exact, and underflows to 0 as it should). Below -104
// (where expf is 0) the result is 0, which also keeps -inf from turning into NaN.
HEARTH_AVX512 __m512 exp_avx512(__m512 x) {
  const __m512 k = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LT_OQ);
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~tiny), y, k);
}

// 16 lanes of exp at a time; the sum in two double vectors of 8 lanes, then their lanes
// in a fixed order.
__attribute__((target("avx512f,avx512dq"))) double exp_sum_avx512(float* s, int64_t n, float max) {
  const __m512 vmax = _mm512_set1_ps(max);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = tail_mask(n - j);
    const __m512 w = _mm512_maskz_mov_ps(k, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vmax)));
    _mm512_mask_storeu_ps(s + j, k, w);
    lo = _mm512_add_pd(lo, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, w, 0)));
    hi = _mm512_add_pd(hi, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, w, 1)));
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(lo, hi));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Row loaders for weighted_sum_heads: 16 floats of value row j at element i, lanes past
// the mask zero.
struct F32Rows {
  const float* v;
  int64_t stride;
  HEARTH_AVX512 __m512 operator()(int64_t j, int64_t i, __mmask16 m) const {
    return _mm512_maskz_loadu_ps(m, v + j * stride + i);
  }
  HEARTH_AVX512 __m512 full(int64_t j, int64_t i) const { return _mm512_loadu_ps(v + j * stride + i); }
  bool full_ok() const { return true; }
  void prefetch(int64_t j, int64_t n) const { prefetch_bytes(v + j * stride, n * 4); }
};
struct F16Rows {
  const uint16_t* const* v;
  int64_t col;
  HEARTH_AVX512 __m512 operator()(int64_t j, int64_t i, __mmask16 m) const {
    const uint16_t* p = v[j] + col + i;
    if (m == 0xFFFF) return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    alignas(32) uint16_t tail[16] = {};
    for (int l = 0; l < 16; ++l)
      if (m >> l & 1) tail[l] = p[l];
    return _mm512_maskz_cvtph_ps(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(tail)));
  }
  HEARTH_AVX512 __m512 full(int64_t j, int64_t i) const {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[j] + col + i)));
  }
  bool full_ok() const { return true; }
  void prefetch(int64_t j, int64_t n) const { prefetch_bytes(v[j] + col, n * 2); }
};

struct Q8_0Rows {
  const uint8_t* const* v;
  int64_t col;
  HEARTH_AVX512 __m512 operator()(int64_t j, int64_t i, __mmask16 m) const {
    const int64_t e = col + i;
    if (m == 0xFFFF && e % 16 == 0) return q8_0_16(v[j], e);
    alignas(64) float part[16] = {};
    for (int l = 0; l < 16; ++l) {
      if (!(m >> l & 1)) continue;
      const uint8_t* blk = v[j] + (e + l) / 32 * 34;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      part[l] = static_cast<float>(static_cast<int8_t>(blk[2 + (e + l) % 32])) * fp16_to_fp32(d);
    }
    return _mm512_maskz_load_ps(m, part);
  }
  HEARTH_AVX512 __m512 full(int64_t j, int64_t i) const { return q8_0_16(v[j], col + i); }
  bool full_ok() const { return col % 16 == 0; }  // 16 elements from col + i inside one block
  void prefetch(int64_t j, int64_t n) const { prefetch_bytes(v[j] + col / 32 * 34, (n + 31) / 32 * 34); }
};

__attribute__((target("avx512f,avx512dq"))) void weighted_sum_avx512(float* const* out, const float* const* w,
                                                                     int n_heads, const float* v, int64_t v_stride,
                                                                     int64_t n_j, int64_t n, bool accumulate) {
  weighted_sum_heads(out, w, n_heads, n_j, n, accumulate, F32Rows{v, v_stride});
}

__attribute__((target("avx512f,avx512dq"))) void weighted_sum_f16_avx512(float* const* out, const float* const* w,
                                                                         int n_heads, const uint16_t* const* v,
                                                                         int64_t col, int64_t n_j, int64_t n,
                                                                         bool accumulate) {
  weighted_sum_heads(out, w, n_heads, n_j, n, accumulate, F16Rows{v, col});
}

__attribute__((target("avx512f,avx512dq"))) void weighted_sum_q8_0_avx512(float* const* out, const float* const* w,
                                                                          int n_heads, const uint8_t* const* v,
                                                                          int64_t col, int64_t n_j, int64_t n,
                                                                          bool accumulate) {
  weighted_sum_heads(out, w, n_heads, n_j, n, accumulate, Q8_0Rows{v, col});
}
#endif

// The kernels of a level without transposing ones (AVX2, scalar): each (pair, key) one dot
// of a key row, each value row one axpy per head, keys and values read in place by
// converting a row at a time; the softmax parts are the scalar ones.
template <float (*kDot)(const float*, const float*, int64_t), void (*kAxpy)(float*, float, const float*, int64_t)>
AttnKernels row_kernels() {
  return {qk_each<kDot>,
          false,
          nullptr,
          nullptr,
          nullptr,
          qk_rows_each<kDot, uint16_t, f16_part>,
          qk_rows_each<kDot, uint8_t, q8_0_part>,
          weighted_sum_each<kAxpy>,
          weighted_sum_rows_each<kAxpy, uint16_t, f16_part>,
          weighted_sum_rows_each<kAxpy, uint8_t, q8_0_part>,
          false,
          scale_max_scalar,
          scale_scalar,
          exp_sum_scalar};
}

}  // namespace

AttnKernels attn_kernels(SimdLevel level) {
#if defined(__x86_64__)
  if (level >= SimdLevel::AVX512)
    return {qk_avx512,
            true,
            transpose_rows_avx512,
            transpose_f16_rows_avx512,
            transpose_q8_0_rows_avx512,
            qk_f16_rows_avx512,
            qk_q8_0_rows_avx512,
            weighted_sum_avx512,
            weighted_sum_f16_avx512,
            weighted_sum_q8_0_avx512,
            true,
            scale_max_avx512,
            scale_avx512,
            exp_sum_avx512};
  if (level >= SimdLevel::AVX2) return row_kernels<dot_avx2, axpy_avx2>();
#else
  (void)level;
#endif
  return row_kernels<dot_scalar, axpy_scalar>();
}

}  // namespace hearth::cpu
