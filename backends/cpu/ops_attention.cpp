// Attention over one sequence's cached keys and values (OpKind::Attention).
//
// For every (query row t, head h): s_j = f0 * q_h . k_j for the visible positions j, an
// optional softcap, p = softmax(s), out_h = sum_j p_j v_j, with j in increasing order.
//
// Keys and values are first converted from the cache type to f32 for the positions any
// row can see ([lo, n_kv)), once per op, in parallel (keys transposed where the level's
// kernel reads them so, f16 and Q8_0 keys converted and transposed in one pass); the per-head
// loops then read f32. Where the level reads f16 or Q8_0 values in place, values are not
// staged at all.
//
// The softmax is online (as in flash attention): each (row, head) walks its keys in tiles of
// kAttnTile on the grid of absolute positions, keeping a running maximum m and sum; a tile's
// weights are exp(s_j - m), and when a tile raises m the output and the sum so far are
// scaled by exp(m_old - m_new) first; the output is divided by the sum at the end. The tiles
// lie where the row's position puts them, so a token's output does not depend on how its
// prompt was chunked or what was batched beside it. A task is up to kAttnMaxRows
// consecutive query rows and the heads of one KV group: a tile's keys and values, fetched
// once, serve every (row, head) pair of the task, and its scores (pairs x kAttnTile floats)
// stay in L2 however long the context. The per-row schedule (a task per row, kept as the
// reference the tests compare with) runs the same arithmetic.
//
// Before (numerics 3) each row's softmax was exact over its whole score row, which the
// tasks kept in memory: 16 rows of Gemma 3's 4 heads at 16,384 keys are 4 MB, past L2. On
// Zen 5, default model, a 16,384-token prompt now reads at 1,599-1,690 tok/s at 2 threads
// (1,354-1,507 before) and 876-898 at 1 (744-800); 4,096 tokens and decode as before.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/ops.h"

namespace hearth::cpu {
namespace {

// Query rows per task of the row-tiled schedule (at most): each key and value tile fetched
// serves up to kAttnMaxRows x (heads per KV group) (row, head) pairs. On the default model
// 64 rows read a 16,384-token prompt 10% faster than 16 at 1 thread (861 vs 769-793 tok/s),
// and as fast at 2 threads and at 512 or 4,096 tokens; Qwen2.5 is the same at 16 or 64.
constexpr int64_t kAttnMaxRows = 64;
// Keys per tile of the online softmax, on a grid of absolute positions (so that a row's
// arithmetic depends on its position only, not on the rows batched with it). A task's
// scores are kAttnMaxRows x heads x kAttnTile floats (64 KB for Gemma 3's 4 heads), in L2
// whatever the context; 256 f16 value rows of one KV head are 32 KB (64 floats) to 128 KB
// (256 floats).
constexpr int64_t kAttnTile = 256;
// The most bytes of keys and values a decode step's task asks for at once before it starts
// (prefetch_kv): a quarter of a 2 MB L2. At 1 thread on the Sapphire Rapids guest, Gemma 3 at
// 16-512 tokens of context read its attention 30-35% faster with it, at 4,096 15%.
constexpr size_t kKvBurstBytes = size_t{512} << 10;
// Keys per block of the staged (transposed) keys: 32 KB of one KV head (32 keys of Gemma
// 3's 256 floats, 128 of Qwen2.5's 64), which stay in L1 while the pairs of a task go
// through them; a multiple of 32, the keys the kernel takes at a time. (Blocks of 64 keys
// of 256 floats, or 32 of 64, measured slower.)
int64_t key_tile_for(int64_t head_dim) {
  return std::clamp<int64_t>(32 * 1024 / 4 / std::max<int64_t>(head_dim, 1) / 32 * 32, 32, 256);
}

AttnSchedule initial_schedule() {
  const char* env = std::getenv("HEARTH_ATTN_SCHEDULE");
  return env != nullptr && std::strcmp(env, "rows") == 0 ? AttnSchedule::PerRow : AttnSchedule::RowTiles;
}

std::atomic<AttnSchedule>& schedule() {
  static std::atomic<AttnSchedule> s{initial_schedule()};
  return s;
}

// Floats between score rows of n keys: an odd number of 64-byte lines, so that the rows read
// or written side by side fall in different cache sets (rows 4096 floats apart would all
// fall in one set of L1).
int64_t score_stride(int64_t n) {
  return ((n + 15) / 16 * 16) | 16;
}

// Up to kAttnMaxGroup (row, head) pairs for one kernel call: what it reads for each (query
// or weights) and where it writes (scores or output).
struct PairBatch {
  const float* in[kAttnMaxGroup];
  float* out[kAttnMaxGroup];
  int n = 0;
};

}  // namespace

AttnSchedule set_attn_schedule(AttnSchedule s) {
  return schedule().exchange(s, std::memory_order_relaxed);
}

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
  // order. Levels whose in-place kernels convert a row per call do so for one query row only.
  const bool v_any = kern.values_in_place_fused || n_q == 1;
  const bool v_f16 = v_any && op.src3.type == DType::F16 && kern.weighted_sum_f16 != nullptr;
  const bool v_q8 = v_any && op.src3.type == DType::Q8_0 && kern.weighted_sum_q8_0 != nullptr;
  const bool v_in_place = v_f16 || v_q8;
  // Keys too are read in place, converted and transposed in registers by each call, where
  // no two calls read the same keys for the same heads: one query row (a decode step). A
  // staged copy would be written and read again for that one use, and at long contexts the
  // staging is most of the op. With more rows, the staged keys serve them all.
  const bool k_f16 = op.src2.type == DType::F16 && kern.qk_f16_rows != nullptr;
  const bool k_q8 = op.src2.type == DType::Q8_0 && kern.qk_q8_0_rows != nullptr;
  const bool k_in_place = (k_f16 || k_q8) && n_q == 1 && head_dim % 16 == 0;
  std::vector<const uint16_t*> v_rows_f16, k_rows_f16;
  std::vector<const uint8_t*> v_rows_q8, k_rows_q8;
  for (int64_t j = 0; (v_in_place || k_in_place) && j < n_stage; ++j) {
    const int32_t slot = kv_slot[lo + j];
    if (v_f16) v_rows_f16.push_back(f16_row(op.src3, slot));
    if (v_q8) v_rows_q8.push_back(raw_row(op.src3, slot));
    if (k_in_place && k_f16) k_rows_f16.push_back(f16_row(op.src2, slot));
    if (k_in_place && k_q8) k_rows_q8.push_back(raw_row(op.src2, slot));
  }
  const int64_t key_block = k_in_place ? kAttnTile : key_tile_for(head_dim);
  // Transposed keys (kern.k_transposed) in blocks of key_block keys: key lo + b * key_block
  // + i is column i of block b, whose element c sits at k_f32[(b * kv_dim + c) * key_block +
  // i]. A KV head's part of a block (head_dim x key_block floats) is one contiguous run, so a
  // tile of keys streams in order instead of touching head_dim rows a whole cache apart.
  const int64_t n_blocks = (n_stage + key_block - 1) / key_block;
  const int64_t k_floats = k_in_place ? 0 : kern.k_transposed ? n_blocks * key_block * kv_dim : n_stage * kv_dim;
  const int64_t v_floats = v_in_place ? 0 : n_stage * kv_dim;
  float* staged = reinterpret_cast<float*>(ctx.scratch_bytes(static_cast<size_t>(k_floats + v_floats) * sizeof(float)));
  float* k_f32 = staged;             // row j at j * kv_dim, or (kern.k_transposed) in blocks as above
  float* v_f32 = staged + k_floats;  // staged values (only when not read in place)
  // Column j (from lo) of the transposed keys; its elements are key_block floats apart.
  const auto k_column = [&](int64_t j) { return k_f32 + j / key_block * kv_dim * key_block + j % key_block; };
  if (!(k_in_place && v_in_place))
    ctx.pool->run([&](int ith, int nth) {
      // Whole groups of 16 keys per thread, so that none straddles two blocks.
      int64_t b, e;
      split_range((n_stage + 15) / 16, ith, nth, &b, &e);
      b = b * 16;
      e = std::min(e * 16, n_stage);
      if (!v_in_place)
        for (int64_t j = b; j < e; ++j) load_row_f32(op.src3, kv_slot[lo + j], v_f32 + j * kv_dim);
      if (k_in_place) return;
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
          transpose(rows, n_rows, kv_dim, k_column(j0), key_block);
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
        kern.transpose_rows(block.data(), n_rows, kv_dim, k_column(j0), key_block);
      }
    });

  // out[h][j - j_begin] = q[h] . key j for j in [j_begin, j_end): one kern.qk call per block
  // of transposed keys.
  const auto qk = [&](const float* const* q, int nh, int64_t kvh, int64_t j_begin, int64_t j_end, float* const* out) {
    if (k_in_place && k_f16) {
      kern.qk_f16_rows(q, nh, k_rows_f16.data() + (j_begin - lo), kvh * head_dim, j_end - j_begin, head_dim, out);
      return;
    }
    if (k_in_place) {
      kern.qk_q8_0_rows(q, nh, k_rows_q8.data() + (j_begin - lo), kvh * head_dim, j_end - j_begin, head_dim, out);
      return;
    }
    if (!kern.k_transposed) {
      kern.qk(q, nh, k_f32 + (j_begin - lo) * kv_dim + kvh * head_dim, kv_dim, j_end - j_begin, head_dim, out);
      return;
    }
    float* part[kAttnMaxGroup];
    for (int64_t j = j_begin; j < j_end;) {
      const int64_t j1 = std::min(j_end, lo + ((j - lo) / key_block + 1) * key_block);
      for (int h = 0; h < nh; ++h) part[h] = out[h] + (j - j_begin);
      kern.qk(q, nh, k_column(j - lo) + kvh * head_dim * key_block, key_block, j1 - j, head_dim, part);
      j = j1;
    }
  };
  // out[h] = sum over keys [j, j + n_j) of w[h][.] * value, for KV head kvh.
  const auto weighted_sum = [&](float* const* out, const float* const* w, int nh, int64_t kvh, int64_t j, int64_t n_j,
                                bool accumulate) {
    if (v_f16) {
      kern.weighted_sum_f16(out, w, nh, v_rows_f16.data() + (j - lo), kvh * head_dim, n_j, head_dim, accumulate);
    } else if (v_q8) {
      kern.weighted_sum_q8_0(out, w, nh, v_rows_q8.data() + (j - lo), kvh * head_dim, n_j, head_dim, accumulate);
    } else {
      kern.weighted_sum(out, w, nh, v_f32 + (j - lo) * kv_dim + kvh * head_dim, kv_dim, n_j, head_dim, accumulate);
    }
  };
  // The keys query row t sees: [j_begin, j_end), empty when j_end <= j_begin.
  const auto key_range = [&](int64_t t, int64_t* j_begin, int64_t* j_end) {
    const int64_t p = q_pos[t];
    *j_begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    *j_end = std::min<int64_t>(n_kv, p + 1);
  };
  const float* q_data = row_f32(op.src0, 0);
  float* out_data = row_f32(op.dst, 0);
  const int64_t q_stride = static_cast<int64_t>(op.src0.row_stride / sizeof(float));
  const int64_t out_stride = static_cast<int64_t>(op.dst.row_stride / sizeof(float));
  const int64_t sc_stride = score_stride(kAttnTile);

  // One query row reads its keys and values in place, each once (a decode step). Asked for
  // all at once (into L2, up to kKvBurstBytes) before the kernels start, they come from
  // memory in one burst instead of a block at a time as the kernels reach them; in each
  // task, so that they land in the L2 of the core that reads them.
  const auto prefetch_kv = [&](int64_t j0, int64_t j1, int64_t kvh) {
#if defined(__x86_64__)
    const size_t k_at = row_bytes(op.src2.type, kvh * head_dim), k_len = row_bytes(op.src2.type, head_dim);
    const size_t v_at = row_bytes(op.src3.type, kvh * head_dim), v_len = row_bytes(op.src3.type, head_dim);
    j1 = std::min<int64_t>(j1, j0 + static_cast<int64_t>(kKvBurstBytes / (k_len + v_len)));
    for (int64_t j = j0; j < j1; ++j) {
      const int32_t slot = kv_slot[j];
      for (size_t b = 0; b < k_len; b += 64) _mm_prefetch(raw_row(op.src2, slot) + k_at + b, _MM_HINT_T2);
      for (size_t b = 0; b < v_len; b += 64) _mm_prefetch(raw_row(op.src3, slot) + v_at + b, _MM_HINT_T2);
    }
#endif
  };

  // Attention of query rows [t0, t0 + nr) with heads [h0, h0 + nh) of KV head kvh: pair
  // (r, h). Walks the keys in tiles of kAttnTile on the grid of absolute positions; for
  // each tile, the pairs' scores (in `scores`, pair (r, h) at (r * nh + h) * sc_stride),
  // then each pair's online-softmax step, then the weighted sums continuing each output.
  const auto attend = [&](std::vector<float>& scores, int64_t t0, int64_t nr, int64_t kvh, int64_t h0, int64_t nh) {
    int64_t jb[kAttnMaxRows], je[kAttnMaxRows];
    float m[kAttnMaxRows * kAttnMaxGroup];
    double sum[kAttnMaxRows * kAttnMaxGroup];
    int64_t span_lo = n_kv, span_hi = 0;
    for (int64_t r = 0; r < nr; ++r) {
      key_range(t0 + r, &jb[r], &je[r]);
      std::fill_n(out_data + (t0 + r) * out_stride + h0 * head_dim, nh * head_dim, 0.0f);
      if (je[r] <= jb[r]) continue;
      span_lo = std::min(span_lo, jb[r]);
      span_hi = std::max(span_hi, je[r]);
    }
    std::fill_n(m, nr * nh, -std::numeric_limits<float>::infinity());
    std::fill_n(sum, nr * nh, 0.0);
    if (span_hi <= span_lo) return;
    if (k_in_place && v_in_place) prefetch_kv(span_lo, span_hi, kvh);
    if (static_cast<int64_t>(scores.size()) < nr * nh * sc_stride) scores.resize(nr * nh * sc_stride);
    const auto q_of = [&](int64_t r, int64_t h, int64_t) { return q_data + (t0 + r) * q_stride + (h0 + h) * head_dim; };
    const auto out_of = [&](int64_t r, int64_t h, int64_t) {
      return out_data + (t0 + r) * out_stride + (h0 + h) * head_dim;
    };
    int64_t tile0 = 0;  // the current tile's first key
    const auto sc_of = [&](int64_t r, int64_t h, int64_t j) {
      return scores.data() + (r * nh + h) * sc_stride + (j - tile0);
    };
    // Calls step(pairs, j, n_j) for the keys of [from, to) in parts of `part` keys on a
    // grid from `origin`, in increasing j: the rows that see a whole part together,
    // kAttnMaxGroup pairs a call; each row that sees some of it alone over that. Pair (r, h)
    // of a call starting at key j reads in_of(r, h, j) and writes out_of(r, h, j).
    const auto for_each_part = [&](int64_t part, int64_t origin, int64_t from, int64_t to, auto in_of, auto out_of,
                                   auto step) {
      for (int64_t k0 = origin + (from - origin) / part * part; k0 < to; k0 += part) {
        const int64_t j0 = std::max(k0, from), j1 = std::min(k0 + part, to);
        PairBatch full;
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t a = std::max(j0, jb[r]), b = std::min(j1, je[r]);
          if (a >= b) continue;
          PairBatch one;
          PairBatch& batch = a == j0 && b == j1 ? full : one;
          for (int64_t h = 0; h < nh; ++h) {
            batch.in[batch.n] = in_of(r, h, a);
            batch.out[batch.n] = out_of(r, h, a);
            if (++batch.n == kAttnMaxGroup) {
              step(batch, a, b - a);
              batch.n = 0;
            }
          }
          if (one.n > 0) step(one, a, b - a);
        }
        if (full.n > 0) step(full, j0, j1 - j0);
      }
    };
    for (tile0 = span_lo / kAttnTile * kAttnTile; tile0 < span_hi; tile0 += kAttnTile) {
      const int64_t from = std::max(tile0, span_lo), to = std::min(tile0 + kAttnTile, span_hi);
      // Scores a block of staged keys at a time, so that it stays in L1 while every pair
      // goes through it.
      for_each_part(key_block, k_in_place ? tile0 : lo, from, to, q_of, sc_of,
                    [&](const PairBatch& b, int64_t j, int64_t n_j) { qk(b.in, b.n, kvh, j, j + n_j, b.out); });
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t a = std::max(from, jb[r]), b = std::min(to, je[r]);
        for (int64_t h = 0; h < nh && a < b; ++h) {
          float* sc = sc_of(r, h, a);
          const int64_t n_j = b - a;
          float tile_max;
          if (softcap > 0.0f) {
            tile_max = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < n_j; ++j) {
              sc[j] = softcap * std::tanh(scale * sc[j] / softcap);
              tile_max = std::max(tile_max, sc[j]);
            }
          } else {
            tile_max = kern.scale_max(sc, n_j, scale);
          }
          const int64_t k = r * nh + h;
          if (tile_max > m[k]) {
            // A new maximum: what was summed so far is scaled down to it.
            if (sum[k] > 0.0) {
              const float alpha = std::exp(m[k] - tile_max);
              sum[k] *= static_cast<double>(alpha);
              kern.scale(out_of(r, h, 0), head_dim, alpha);
            }
            m[k] = tile_max;
          }
          if (m[k] == -std::numeric_limits<float>::infinity()) {
            std::fill_n(sc, n_j, 0.0f);  // no finite score yet: nothing to weigh
            continue;
          }
          sum[k] += kern.exp_sum(sc, n_j, m[k]);
        }
      }
      for_each_part(kAttnTile, tile0, from, to, sc_of, out_of, [&](const PairBatch& b, int64_t j, int64_t n_j) {
        weighted_sum(b.out, b.in, b.n, kvh, j, n_j, true);
      });
    }
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t h = 0; h < nh; ++h)
        if (sum[r * nh + h] > 0.0) kern.scale(out_of(r, h, 0), head_dim, static_cast<float>(1.0 / sum[r * nh + h]));
  };

  if (schedule().load(std::memory_order_relaxed) == AttnSchedule::PerRow) {
    // A task is one query row and up to kAttnMaxGroup heads of one KV group, so each key and
    // value row loaded serves them all; single heads when that leaves threads idle (decode).
    const int64_t sub =
        n_q * n_kv_heads >= 4 * static_cast<int64_t>(ctx.pool->size()) ? std::min<int64_t>(group, kAttnMaxGroup) : 1;
    const int64_t subs = (group + sub - 1) / sub;  // tasks per (row, KV head)
    const int64_t n_tasks = n_q * n_kv_heads * subs;
    ctx.pool->run([&](int ith, int nth) {
      std::vector<float>& scores = ctx.thread_scratch[ThreadPool::current_worker()];
      for (int64_t task = ith; task < n_tasks; task += nth) {
        const int64_t t = task / (n_kv_heads * subs), kvh = task / subs % n_kv_heads;
        const int64_t h0 = kvh * group + task % subs * sub;
        attend(scores, t, 1, kvh, h0, std::min(sub, kvh * group + group - h0));
      }
    });
    return;
  }

  // Row tiles: task = (tile of n_rows query rows, KV head, nh <= n_sub of its heads), so a
  // key or value fetched serves every row and head of the task. Rows per tile: up to
  // kAttnMaxRows, fewer when that leaves threads without two tasks; a group's heads split
  // between tasks only when even single rows leave threads idle (decode with one KV head).
  const int64_t n_threads = ctx.pool->size();
  const int64_t n_rows = std::clamp<int64_t>(n_q * n_kv_heads / (2 * n_threads), 1, kAttnMaxRows);
  const int64_t n_row_tiles = (n_q + n_rows - 1) / n_rows;
  const int64_t splits = std::clamp<int64_t>(n_threads / std::max<int64_t>(n_row_tiles * n_kv_heads, 1), 1, group);
  const int64_t n_sub = (group + splits - 1) / splits;  // heads per task
  const int64_t subs = (group + n_sub - 1) / n_sub;     // tasks per (row tile, KV head)
  const int64_t n_tasks = n_row_tiles * n_kv_heads * subs;
  ctx.pool->run([&](int ith, int nth) {
    std::vector<float>& scores = ctx.thread_scratch[ThreadPool::current_worker()];
    for (int64_t task = ith; task < n_tasks; task += nth) {
      const int64_t t0 = task / (n_kv_heads * subs) * n_rows, kvh = task / subs % n_kv_heads;
      const int64_t h0 = kvh * group + task % subs * n_sub;
      attend(scores, t0, std::min(n_rows, n_q - t0), kvh, h0, std::min(n_sub, kvh * group + group - h0));
    }
  });
}

}  // namespace hearth::cpu
