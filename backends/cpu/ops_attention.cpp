// Attention over one sequence's cached keys and values (OpKind::Attention).
//
// For every (query row t, head h): s_j = f0 * q_h . k_j for the visible positions j, an
// optional softcap, p = softmax(s), out_h = sum_j p_j v_j, with j in increasing order.
// The same arithmetic runs whatever the number of query rows, so a token's output does
// not depend on how its prompt was chunked.
//
// Keys and values are first converted from the cache type to f32 for the positions any
// row can see ([lo, n_kv)), once per op, in parallel; the per-head loops then read f32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/ops.h"
#include "backends/cpu/vec_dot.h"

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

__attribute__((target("avx512f,avx512dq"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  // Horizontal sum by halves (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized).
  const __m512 acc = _mm512_add_ps(acc0, acc1);
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(acc, 0), _mm512_extractf32x8_ps(acc, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  float s = _mm_cvtss_f32(s4);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

__attribute__((target("avx512f"))) void axpy_avx512(float* y, float a, const float* x, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}
#endif

using DotFn = float (*)(const float*, const float*, int64_t);
using AxpyFn = void (*)(float*, float, const float*, int64_t);

void pick_kernels(DotFn* dot, AxpyFn* axpy) {
  *dot = dot_scalar;
  *axpy = axpy_scalar;
#if defined(__x86_64__)
  const SimdLevel level = active_simd_level();
  if (level >= SimdLevel::AVX512) {
    *dot = dot_avx512;
    *axpy = axpy_avx512;
  } else if (level >= SimdLevel::AVX2) {
    *dot = dot_avx2;
    *axpy = axpy_avx2;
  }
#endif
}

}  // namespace

void op_attention(const Op& op, const Graph& g, ExecContext& ctx) {
  const std::span<const int32_t> q_pos = g.get(op.ia);
  const std::span<const int32_t> kv_slot = g.get(op.ib);
  const int64_t n_q = op.src0.rows;
  const int64_t n_kv = static_cast<int64_t>(kv_slot.size());
  const int64_t n_heads = op.i0, n_kv_heads = op.i1, head_dim = op.i2, window = op.i3;
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_dim = n_kv_heads * head_dim;
  const float scale = op.f0, softcap = op.f1;

  // Positions visible to at least one query row.
  int64_t min_pos = n_kv, max_pos = 0;
  for (int32_t p : q_pos) {
    min_pos = std::min<int64_t>(min_pos, p);
    max_pos = std::max<int64_t>(max_pos, p);
  }
  const int64_t lo = window > 0 ? std::max<int64_t>(0, min_pos - window + 1) : 0;
  const int64_t hi = std::min<int64_t>(n_kv, max_pos + 1);  // exclusive
  const int64_t n_stage = std::max<int64_t>(0, hi - lo);

  float* staged = reinterpret_cast<float*>(
      ctx.scratch_bytes(static_cast<size_t>(n_stage) * kv_dim * 2 * sizeof(float)));
  float* k_f32 = staged;
  float* v_f32 = staged + n_stage * kv_dim;
  ctx.pool->run([&](int ith, int nth) {
    int64_t b, e;
    split_range(n_stage, ith, nth, &b, &e);
    for (int64_t j = b; j < e; ++j) {
      load_row_f32(op.src2, kv_slot[lo + j], k_f32 + j * kv_dim);
      load_row_f32(op.src3, kv_slot[lo + j], v_f32 + j * kv_dim);
    }
  });

  DotFn dot;
  AxpyFn axpy;
  pick_kernels(&dot, &axpy);

  ctx.pool->run([&](int ith, int nth) {
    std::vector<float>& scores = ctx.thread_scratch[ThreadPool::current_worker()];
    if (static_cast<int64_t>(scores.size()) < n_stage) scores.resize(n_stage);
    for (int64_t task = ith; task < n_q * n_heads; task += nth) {
      const int64_t t = task / n_heads, h = task % n_heads;
      const int64_t kvh = h / group;
      const int64_t p = q_pos[t];
      const int64_t j_begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      const int64_t j_end = std::min<int64_t>(n_kv, p + 1);
      const float* q = row_f32(op.src0, t) + h * head_dim;
      float* out = row_f32(op.dst, t) + h * head_dim;
      std::fill(out, out + head_dim, 0.0f);
      if (j_end <= j_begin) continue;

      float max_s = -std::numeric_limits<float>::infinity();
      for (int64_t j = j_begin; j < j_end; ++j) {
        float s = scale * dot(q, k_f32 + (j - lo) * kv_dim + kvh * head_dim, head_dim);
        if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
        scores[j - j_begin] = s;
        max_s = std::max(max_s, s);
      }
      double sum = 0.0;
      for (int64_t j = j_begin; j < j_end; ++j) {
        const float w = std::exp(scores[j - j_begin] - max_s);
        scores[j - j_begin] = w;
        sum += w;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = j_begin; j < j_end; ++j)
        axpy(out, scores[j - j_begin] * inv, v_f32 + (j - lo) * kv_dim + kvh * head_dim, head_dim);
    }
  });
}

}  // namespace hearth::cpu
