// The CPU attention's two schedules (one task per query row; tiles of query rows walking
// the keys in tiles) give the same output bits, and the weighted-sum kernels continue a sum
// from memory exactly as they would have in registers. Bit identity means a row's output
// depends on its position only, not on the rows that share its task: the online softmax's
// tiles lie on the grid of absolute positions, and the prompt cache's KV rows are computed
// from these outputs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"
#include "quant/quant_test_util.h"
#include "test_util.h"

namespace {

using namespace hearth;

// Restores the SIMD level and the attention schedule a test changed.
struct Restore {
  cpu::SimdLevel level = cpu::active_simd_level();
  cpu::AttnSchedule schedule = cpu::set_attn_schedule(cpu::AttnSchedule::RowTiles);
  ~Restore() {
    cpu::set_simd_level(level);
    cpu::set_attn_schedule(schedule);
  }
};

struct Shape {
  const char* name;
  int32_t n_heads, n_kv_heads, head_dim;
};

// A query batch: rows at positions first .. first + n_q - 1 (a prefill chunk, or one
// decoded token) over a cache holding positions 0 .. n_kv - 1.
struct Batch {
  int32_t first, n_q, n_kv;
};

class AttentionRun {
 public:
  AttentionRun(const Shape& s, DType kv_type, int32_t n_slots, std::mt19937& rng) : s_(s) {
    const int64_t kv_dim = int64_t{s.n_kv_heads} * s.head_dim;
    k_ = make(kv_type, kv_dim, n_slots);
    v_ = make(kv_type, kv_dim, n_slots);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(kv_dim));
    std::vector<uint8_t> bytes(row_bytes(kv_type, kv_dim));
    for (const Tensor* t : {&k_, &v_})
      for (int32_t slot = 0; slot < n_slots; ++slot) {
        for (float& x : row) x = d(rng);
        cpu::quantize_row(kv_type, row.data(), bytes.data(), kv_dim);
        REQUIRE(be_->write(*t->buffer, t->offset + slot * t->row_stride, bytes.data(), bytes.size()).ok());
      }
  }

  // The attention output [n_q, n_heads * head_dim] for queries q at positions pos, position
  // j's key and value in cache slot slots[j].
  std::vector<float> run(const std::vector<float>& q, const std::vector<int32_t>& pos,
                         const std::vector<int32_t>& slots, int32_t window, float softcap) {
    const int64_t n_q = static_cast<int64_t>(pos.size()), width = int64_t{s_.n_heads} * s_.head_dim;
    Op op{OpKind::Attention};
    op.src0 = make(DType::F32, width, n_q);
    REQUIRE(be_->write(*op.src0.buffer, 0, q.data(), q.size() * sizeof(float)).ok());
    op.src2 = k_;
    op.src3 = v_;
    op.dst = make(DType::F32, width, n_q);
    op.i0 = s_.n_heads;
    op.i1 = s_.n_kv_heads;
    op.i2 = s_.head_dim;
    op.i3 = window;
    op.f0 = 1.0f / static_cast<float>(s_.head_dim) * 8.0f;  // peaked enough that softmax matters
    op.f1 = softcap;
    Graph g;
    op.ia = g.add_ints(pos);
    op.ib = g.add_ints(slots);
    g.ops.push_back(op);
    REQUIRE(be_->execute(g).ok());
    std::vector<float> out(static_cast<size_t>(n_q * width));
    REQUIRE(be_->read(*op.dst.buffer, 0, out.data(), out.size() * sizeof(float)).ok());
    buffers_.resize(2);  // keep the cache, drop this run's q and output
    return out;
  }

 private:
  Tensor make(DType type, int64_t ne0, int64_t rows) {
    Tensor t;
    t.type = type;
    t.ne0 = ne0;
    t.rows = rows;
    t.row_stride = row_bytes(type, ne0);
    buffers_.push_back(std::move(*be_->alloc(t.row_stride * rows, BufferKind::Activations)));
    t.buffer = buffers_.back().get();
    return t;
  }

  Shape s_;
  std::unique_ptr<Backend> be_ = cpu::make_cpu_backend({2});
  std::vector<std::unique_ptr<Buffer>> buffers_;
  Tensor k_, v_;
};

// The cache slots of positions 0 .. n - 1: n of the n_slots, shuffled.
std::vector<int32_t> shuffled_slots(int32_t n_slots, int32_t n, std::mt19937& rng) {
  std::vector<int32_t> slots(static_cast<size_t>(n_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(n));
  return slots;
}

}  // namespace

// Gemma 3 270M's attention (4 heads on 1 KV head of 256, sliding window of 512 on most
// layers) and Qwen2.5-0.5B's (14 heads on 2 KV heads of 64, 7 heads a group), over f16, Q8_0
// and f32 caches whose positions sit in shuffled slots, for decode steps, batches around the
// row tile of 64, a whole 600-token prefill (three key tiles of 256) and later chunks of
// one, at every SIMD level. Windows of 7 and a softcap put row ranges' ends inside key tiles
// at both sides.
TEST_CASE("Attention's row-tiled schedule gives the per-row schedule's output bit for bit") {
  Restore restore;
  const Shape shapes[] = {{"gemma3-270m", 4, 1, 256}, {"qwen2.5-0.5b", 14, 2, 64}};
  std::vector<Batch> batches = {{0, 1, 1},      {300, 1, 301}, {0, 15, 15},    {0, 64, 64},    {0, 65, 130},
                                {200, 63, 263}, {0, 600, 600}, {512, 88, 600}, {100, 333, 433}};
  // Under the sanitizers (116 s there, 15x Release) without the 600-row prompt, 61% of the
  // work: {512, 88, 600} still crosses the 512 window over 600 keys, {100, 333, 433} still
  // walks many row and key tiles.
  if (test::kSanitized) std::erase_if(batches, [](const Batch& b) { return b.n_q == 600; });
  const int32_t max_kv = 600, n_slots = 640;
  std::mt19937 rng(2026);
  for (const Shape& shape : shapes)
    for (DType kv_type : {DType::F16, DType::Q8_0, DType::F32}) {
      AttentionRun cache(shape, kv_type, n_slots, rng);
      const std::vector<int32_t> slots = shuffled_slots(n_slots, max_kv, rng);
      for (const Batch& b : batches)
        for (int32_t window : {0, 512, 7})
          for (float softcap : {0.0f, 30.0f}) {
            if (softcap > 0.0f && window == 7) continue;
            std::vector<int32_t> pos(static_cast<size_t>(b.n_q));
            std::iota(pos.begin(), pos.end(), b.first);
            std::normal_distribution<float> d(0.0f, 1.0f);
            std::vector<float> q(static_cast<size_t>(b.n_q) * shape.n_heads * shape.head_dim);
            for (float& x : q) x = d(rng);
            const std::vector<int32_t> kv_slots(slots.begin(), slots.begin() + b.n_kv);
            for (cpu::SimdLevel level : test::supported_levels()) {
              cpu::set_simd_level(level);
              INFO(shape.name << " kv " << dtype_name(kv_type) << " level " << cpu::simd_level_name(level) << " first "
                              << b.first << " n_q " << b.n_q << " n_kv " << b.n_kv << " window " << window
                              << " softcap " << softcap);
              cpu::set_attn_schedule(cpu::AttnSchedule::PerRow);
              const std::vector<float> rows = cache.run(q, pos, kv_slots, window, softcap);
              cpu::set_attn_schedule(cpu::AttnSchedule::RowTiles);
              const std::vector<float> tiles = cache.run(q, pos, kv_slots, window, softcap);
              REQUIRE(std::memcmp(rows.data(), tiles.data(), rows.size() * sizeof(float)) == 0);
            }
          }
    }
}

// A decode step (one query row, whose keys are read in place where the level can) gives the
// output the same row gets inside a batch (whose keys are staged once for all its rows), bit
// for bit: the first, a middle and the last row of prefill chunks, on both models' shapes,
// f16, Q8_0 and f32 caches, windows and a softcap, at every SIMD level and both schedules.
TEST_CASE("Attention of one decoded row equals that row's inside a batch, bit for bit") {
  Restore restore;
  const Shape shapes[] = {{"gemma3-270m", 4, 1, 256}, {"qwen2.5-0.5b", 14, 2, 64}};
  const Batch batches[] = {{0, 40, 40}, {300, 20, 320}, {200, 333, 533}};
  const int32_t n_slots = 600;
  std::mt19937 rng(2027);
  for (const Shape& shape : shapes)
    for (DType kv_type : {DType::F16, DType::Q8_0, DType::F32}) {
      AttentionRun cache(shape, kv_type, n_slots, rng);
      const std::vector<int32_t> slots = shuffled_slots(n_slots, n_slots, rng);
      const int64_t width = int64_t{shape.n_heads} * shape.head_dim;
      for (const Batch& b : batches)
        for (int32_t window : {0, 7}) {
          const float softcap = window == 0 ? 30.0f : 0.0f;
          std::vector<int32_t> pos(static_cast<size_t>(b.n_q));
          std::iota(pos.begin(), pos.end(), b.first);
          std::normal_distribution<float> d(0.0f, 1.0f);
          std::vector<float> q(static_cast<size_t>(b.n_q * width));
          for (float& x : q) x = d(rng);
          const std::vector<int32_t> kv_slots(slots.begin(), slots.begin() + b.n_kv);
          for (cpu::SimdLevel level : test::supported_levels())
            for (cpu::AttnSchedule schedule : {cpu::AttnSchedule::RowTiles, cpu::AttnSchedule::PerRow}) {
              cpu::set_simd_level(level);
              cpu::set_attn_schedule(schedule);
              const std::vector<float> batch = cache.run(q, pos, kv_slots, window, softcap);
              for (int32_t r : {0, b.n_q / 2, b.n_q - 1}) {
                INFO(shape.name << " kv " << dtype_name(kv_type) << " level " << cpu::simd_level_name(level)
                                << " first " << b.first << " row " << r << " window " << window);
                // The row alone sees the keys up to its own position, as a decode step does.
                const std::vector<float> q1(q.begin() + r * width, q.begin() + (r + 1) * width);
                const std::vector<int32_t> slots1(kv_slots.begin(), kv_slots.begin() + b.first + r + 1);
                const std::vector<float> alone = cache.run(q1, {pos[static_cast<size_t>(r)]}, slots1, window, softcap);
                REQUIRE(std::memcmp(alone.data(), batch.data() + r * width, alone.size() * sizeof(float)) == 0);
              }
            }
        }
    }
}

// Summing keys [0, a) and then accumulating [a, n_j) onto the stored sums equals one call
// over [0, n_j), for every split, 1 to kAttnMaxGroup heads, f32, f16 and Q8_0 value rows,
// head sizes with and without a partial 16 (and Q8_0 heads off the 16-element grid).
TEST_CASE("Attention's weighted sums continue from memory as from registers at every SIMD level") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (cpu::SimdLevel level : test::supported_levels()) {
    const cpu::AttnKernels k = cpu::attn_kernels(level);
    INFO(cpu::simd_level_name(level));
    for (int64_t n : {256, 64, 72, 5}) {
      const int64_t n_j = 45, col = n == 5 ? 8 : 32, width = ((col + n + 31) / 32) * 32;
      std::vector<float> f(static_cast<size_t>(n_j * width));
      for (float& x : f) x = u(rng);
      std::vector<uint16_t> h(f.size());
      const size_t q8_row = row_bytes(DType::Q8_0, width);
      std::vector<uint8_t> q8(static_cast<size_t>(n_j) * q8_row);
      std::vector<const uint16_t*> h_rows(static_cast<size_t>(n_j));
      std::vector<const uint8_t*> q8_rows(static_cast<size_t>(n_j));
      for (int64_t j = 0; j < n_j; ++j) {
        cpu::quantize_row(DType::F16, f.data() + j * width, h.data() + j * width, width);
        cpu::quantize_row(DType::Q8_0, f.data() + j * width, q8.data() + j * q8_row, width);
        h_rows[static_cast<size_t>(j)] = h.data() + j * width;
        q8_rows[static_cast<size_t>(j)] = q8.data() + j * q8_row;
      }
      for (int heads = 1; heads <= cpu::kAttnMaxGroup; ++heads) {
        std::vector<std::vector<float>> wv(static_cast<size_t>(heads), std::vector<float>(static_cast<size_t>(n_j)));
        const float* w[cpu::kAttnMaxGroup];
        for (int hh = 0; hh < heads; ++hh) {
          for (float& x : wv[static_cast<size_t>(hh)]) x = u(rng);
          w[hh] = wv[static_cast<size_t>(hh)].data();
        }
        // Each kind of value row: sum(out, w, first key, keys, accumulate).
        const auto sum_f32 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum(out, ww, heads, f.data() + j * width + col, width, m, n, acc);
        };
        const auto sum_f16 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum_f16(out, ww, heads, h_rows.data() + j, col, m, n, acc);
        };
        const auto sum_q8 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum_q8_0(out, ww, heads, q8_rows.data() + j, col, m, n, acc);
        };
        const auto check = [&](auto sum) {
          std::vector<float> whole(static_cast<size_t>(heads * n), 7.0f), split(whole);
          float* wo[cpu::kAttnMaxGroup];
          float* so[cpu::kAttnMaxGroup];
          for (int hh = 0; hh < heads; ++hh) wo[hh] = whole.data() + hh * n;
          sum(wo, w, 0, n_j, false);
          for (int64_t a = 0; a <= n_j; a += 4) {
            std::fill(split.begin(), split.end(), 0.0f);  // a = 0: accumulating from zeros
            for (int hh = 0; hh < heads; ++hh) so[hh] = split.data() + hh * n;
            if (a > 0) sum(so, w, 0, a, false);
            const float* rest[cpu::kAttnMaxGroup];
            for (int hh = 0; hh < heads; ++hh) rest[hh] = w[hh] + a;
            if (a < n_j) sum(so, rest, a, n_j - a, true);
            REQUIRE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
          }
        };
        INFO("n " << n << " heads " << heads);
        check(sum_f32);
        if (k.weighted_sum_f16 != nullptr) check(sum_f16);
        if (k.weighted_sum_q8_0 != nullptr) check(sum_q8);
      }
    }
  }
}
