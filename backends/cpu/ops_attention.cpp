// Attention over one sequence's cached keys and values (OpKind::Attention).
//
// For every (query row t, head h): s_j = f0 * q_h . k_j for the visible positions j, an
// optional softcap, p = softmax(s), out_h = sum_j p_j v_j, with j in increasing order.
// The same arithmetic runs whatever the number of query rows, so a token's output does
// not depend on how its prompt was chunked.
//
// Keys and values are first converted from the cache type to f32 for the positions any
// row can see ([lo, n_kv)), once per op, in parallel (keys transposed where the level's
// kernel reads them so, f16 and Q8_0 keys converted and transposed in one pass); the per-head
// loops then read f32. Where the level reads f16 or Q8_0 values in place, values are not
// staged at all.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/ops.h"

namespace hearth::cpu {

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

  const AttnKernels kern = attn_kernels(active_simd_level());
  // Cache row `slot` of a tensor, as bytes and as f16.
  const auto raw_row = [](const Tensor& t, int32_t slot) {
    return tensor_data(t) + static_cast<size_t>(slot) * t.row_stride;
  };
  const auto f16_row = [&](const Tensor& t, int32_t slot) {
    return reinterpret_cast<const uint16_t*>(raw_row(t, slot));
  };
  // f16 and Q8_0 values are read in place where the level can (no staging): their rows, in
  // order.
  const bool v_f16 = op.src3.type == DType::F16 && kern.weighted_sum_f16 != nullptr;
  const bool v_q8 = op.src3.type == DType::Q8_0 && kern.weighted_sum_q8_0 != nullptr;
  const bool v_in_place = v_f16 || v_q8;
  std::vector<const uint16_t*> v_rows_f16;
  std::vector<const uint8_t*> v_rows_q8;
  for (int64_t j = 0; v_in_place && j < n_stage; ++j) {
    if (v_f16) v_rows_f16.push_back(f16_row(op.src3, kv_slot[lo + j]));
    if (v_q8) v_rows_q8.push_back(raw_row(op.src3, kv_slot[lo + j]));
  }
  const size_t staged_rows = static_cast<size_t>(n_stage) * (v_in_place ? 1 : 2);
  float* staged = reinterpret_cast<float*>(ctx.scratch_bytes(staged_rows * kv_dim * sizeof(float)));
  float* k_f32 = staged;                     // row j at j * kv_dim, or (kern.k_transposed) column j of kv_dim rows
  float* v_f32 = staged + n_stage * kv_dim;  // staged values (only when not read in place)
  ctx.pool->run([&](int ith, int nth) {
    int64_t b, e;
    split_range(n_stage, ith, nth, &b, &e);
    if (!v_in_place)
      for (int64_t j = b; j < e; ++j) load_row_f32(op.src3, kv_slot[lo + j], v_f32 + j * kv_dim);
    if (!kern.k_transposed) {
      for (int64_t j = b; j < e; ++j) load_row_f32(op.src2, kv_slot[lo + j], k_f32 + j * kv_dim);
      return;
    }
    // Keys as columns, 16 rows at a time: f16 and Q8_0 rows converted and transposed in one
    // pass; other types converted into this thread's scratch, then written out transposed.
    const auto transpose_in_place = [&](auto row_of, auto transpose) {
      std::remove_cvref_t<decltype(row_of(0))> rows[16];
      for (int64_t j0 = b; j0 < e; j0 += 16) {
        const int64_t n_rows = std::min<int64_t>(16, e - j0);
        for (int64_t i = 0; i < n_rows; ++i) rows[i] = row_of(kv_slot[lo + j0 + i]);
        transpose(rows, n_rows, kv_dim, k_f32 + j0, n_stage);
      }
    };
    if (op.src2.type == DType::F16 && kern.transpose_f16_rows != nullptr) {
      return transpose_in_place([&](int32_t slot) { return f16_row(op.src2, slot); }, kern.transpose_f16_rows);
    }
    if (op.src2.type == DType::Q8_0 && kern.transpose_q8_0_rows != nullptr) {
      return transpose_in_place([&](int32_t slot) { return raw_row(op.src2, slot); }, kern.transpose_q8_0_rows);
    }
    std::vector<float>& block = ctx.thread_scratch[ThreadPool::current_worker()];
    if (static_cast<int64_t>(block.size()) < 16 * kv_dim) block.resize(16 * kv_dim);
    for (int64_t j0 = b; j0 < e; j0 += 16) {
      const int64_t n_rows = std::min<int64_t>(16, e - j0);
      for (int64_t i = 0; i < n_rows; ++i) load_row_f32(op.src2, kv_slot[lo + j0 + i], block.data() + i * kv_dim);
      kern.transpose_rows(block.data(), n_rows, kv_dim, k_f32 + j0, n_stage);
    }
  });

  // A task is one query row and up to kAttnMaxGroup heads of one KV group, so each key and
  // value row loaded serves them all; single heads when that leaves threads idle (decode).
  const int64_t sub =
      n_q * n_kv_heads >= 4 * static_cast<int64_t>(ctx.pool->size()) ? std::min<int64_t>(group, kAttnMaxGroup) : 1;
  const int64_t subs = (group + sub - 1) / sub;  // tasks per (row, KV head)
  const int64_t n_tasks = n_q * n_kv_heads * subs;

  ctx.pool->run([&](int ith, int nth) {
    std::vector<float>& scores = ctx.thread_scratch[ThreadPool::current_worker()];
    if (static_cast<int64_t>(scores.size()) < kAttnMaxGroup * n_stage) scores.resize(kAttnMaxGroup * n_stage);
    for (int64_t task = ith; task < n_tasks; task += nth) {
      const int64_t t = task / (n_kv_heads * subs), kvh = task / subs % n_kv_heads;
      const int64_t h0 = kvh * group + task % subs * sub;
      const int nh = static_cast<int>(std::min(sub, kvh * group + group - h0));
      const int64_t p = q_pos[t];
      const int64_t j_begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      const int64_t j_end = std::min<int64_t>(n_kv, p + 1);
      const float* q[kAttnMaxGroup];
      float* out[kAttnMaxGroup];
      float* sc[kAttnMaxGroup];
      for (int h = 0; h < nh; ++h) {
        q[h] = row_f32(op.src0, t) + (h0 + h) * head_dim;
        out[h] = row_f32(op.dst, t) + (h0 + h) * head_dim;
        sc[h] = scores.data() + h * n_stage;
      }
      if (j_end <= j_begin) {
        for (int h = 0; h < nh; ++h) std::fill(out[h], out[h] + head_dim, 0.0f);
        continue;
      }
      const int64_t n_j = j_end - j_begin;
      if (kern.k_transposed) {
        kern.qk(q, nh, k_f32 + kvh * head_dim * n_stage + (j_begin - lo), n_stage, n_j, head_dim, sc);
      } else {
        kern.qk(q, nh, k_f32 + (j_begin - lo) * kv_dim + kvh * head_dim, kv_dim, n_j, head_dim, sc);
      }
      for (int h = 0; h < nh; ++h) {
        float max_s;
        if (softcap > 0.0f) {
          max_s = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < n_j; ++j) {
            const float s = scale * sc[h][j];
            sc[h][j] = softcap * std::tanh(s / softcap);
            max_s = std::max(max_s, sc[h][j]);
          }
        } else {
          max_s = kern.scale_max(sc[h], n_j, scale);
        }
        const double sum = kern.exp_sum(sc[h], n_j, max_s);
        kern.scale(sc[h], n_j, static_cast<float>(1.0 / sum));
      }
      if (v_f16) {
        kern.weighted_sum_f16(out, sc, nh, v_rows_f16.data() + (j_begin - lo), kvh * head_dim, n_j, head_dim, false);
      } else if (v_q8) {
        kern.weighted_sum_q8_0(out, sc, nh, v_rows_q8.data() + (j_begin - lo), kvh * head_dim, n_j, head_dim, false);
      } else {
        kern.weighted_sum(out, sc, nh, v_f32 + (j_begin - lo) * kv_dim + kvh * head_dim, kv_dim, n_j, head_dim, false);
      }
    }
  });
}

}  // namespace hearth::cpu
