// The CUDA backend's StoreKv and Attention kernels and their launcher
// (backends/cuda/cu_attention.cu, the file itself) run on the host by cuda_on_host.h: a
// block's threads as fibers, its barriers and warp shuffles emulated. Checks, without a
// GPU, what the kernels' own logic decides: the absolute tile and split grid, the block's
// union of key ranges, the staging of tiles in chunks, the online softmax and the merge of
// split partials, the launches in row groups that bound the scratch, windows, softcap, GQA,
// shuffled slots, F32 / F16 / Q8_0 caches: against a double-precision reference, and each
// row alone against its batch, bit for bit (batch invariance).
#include "cuda_on_host.h"
// A small scratch bound, so that long passes run in several launches of rows here.
#define HEARTH_ATTN_MAX_SCRATCH_BYTES (size_t{4} << 10)
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cu_attention.cu"

namespace {

using namespace hearth;
using namespace hearth::cuda;

struct Case {
  const char* name;
  int n_heads, n_kv_heads, head_dim, n_kv, n_q;
  int window;
  float softcap;
  DType kv;
  bool permuted;
  // Scores rising with the key's position (every query is u, key j is j/8 u + noise): the
  // running maximum then grows at every tile, so the result depends on where tiles start.
  bool rising = false;
};

// Rows [n_slots, width] of `type`, from f32 values; `back` gets the values the cache holds.
std::vector<uint8_t> make_cache(DType type, const std::vector<float>& x, int64_t rows, int64_t width,
                                std::vector<float>* back) {
  const size_t row_bytes = type == DType::F32   ? width * 4
                           : type == DType::F16 ? width * 2
                                                : width / kQ8Block * kQ8BlockBytes;
  std::vector<uint8_t> c(row_bytes * static_cast<size_t>(rows));
  back->resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = &x[static_cast<size_t>(r * width)];
    uint8_t* out = &c[static_cast<size_t>(r) * row_bytes];
    if (type == DType::F32) {
      std::memcpy(out, in, row_bytes);
    } else if (type == DType::F16) {
      for (int64_t e = 0; e < width; ++e) {
        const uint16_t h = f32_to_f16_bits(in[e]);
        std::memcpy(out + 2 * e, &h, 2);
      }
    } else {
      quantize_row_q8_0(in, out, width);
    }
    const char* row = reinterpret_cast<const char*>(out);
    for (int64_t e = 0; e < width; ++e) {
      float v = type == DType::F32   ? kv_element<Kv::F32>(row, e)
                : type == DType::F16 ? kv_element<Kv::F16>(row, e)
                                     : kv_element<Kv::Q8_0>(row, e);
      (*back)[static_cast<size_t>(r * width + e)] = v;
    }
  }
  return c;
}

struct Pass {
  explicit Pass(const Case& cc) : c(cc) {}
  const Case& c;
  std::vector<uint8_t> kc, vc;
  size_t kv_row_bytes = 0;
  std::vector<float> q, kf, vf;  // q [n_q, n_heads * hd]; kf, vf [n_slots, n_kv_heads * hd] as cached
  std::vector<int32_t> slots, positions;

  // out [rows.size(), n_heads * hd] for the query rows `rows` (indices into q / positions).
  std::vector<float> run(const std::vector<int>& rows) {
    const int64_t qw = static_cast<int64_t>(c.n_heads) * c.head_dim;
    std::vector<float> qs(rows.size() * static_cast<size_t>(qw)), out(qs.size(), -7.0f);
    std::vector<int32_t> pos(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(&q[static_cast<size_t>(rows[i] * qw)], qw, &qs[i * static_cast<size_t>(qw)]);
      pos[i] = positions[static_cast<size_t>(rows[i])];
    }
    AttentionArgs a;
    a.q = DevRows{qs.data(), qw, static_cast<int64_t>(rows.size()), static_cast<size_t>(qw) * 4};
    const int64_t kvw = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    const int64_t n_slots = static_cast<int64_t>(kc.size() / kv_row_bytes);
    a.k_cache = DevRows{kc.data(), kvw, n_slots, kv_row_bytes};
    a.v_cache = DevRows{vc.data(), kvw, n_slots, kv_row_bytes};
    a.kv_type = c.kv;
    a.positions = pos.data();
    a.slots = slots.data();
    a.n_kv = c.n_kv;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.head_dim = c.head_dim;
    a.window = c.window;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    a.softcap = c.softcap;
    a.dst = DevRows{out.data(), qw, static_cast<int64_t>(rows.size()), static_cast<size_t>(qw) * 4};
    a.max_position = *std::max_element(pos.begin(), pos.end());
    a.min_position = *std::min_element(pos.begin(), pos.end());
    std::vector<uint8_t> scratch(attention_scratch_bytes(a));
    launch_attention(a, scratch.empty() ? nullptr : scratch.data(), nullptr);
    return out;
  }

  // The reference of row r, head h, element d, in double.
  double reference(int r, int h, int d) const {
    const int group = c.n_heads / c.n_kv_heads, kvh = h / group, hd = c.head_dim;
    const int64_t kvw = static_cast<int64_t>(c.n_kv_heads) * hd;
    const int p = positions[static_cast<size_t>(r)];
    const int jb = c.window > 0 ? std::max(0, p - c.window + 1) : 0, je = std::min(c.n_kv, p + 1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> s;
    double mx = -INFINITY;
    for (int j = jb; j < je; ++j) {
      double dot = 0;
      const float* k = &kf[static_cast<size_t>(slots[static_cast<size_t>(j)] * kvw + kvh * hd)];
      for (int e = 0; e < hd; ++e) dot += double(q[static_cast<size_t>(r * c.n_heads * hd + h * hd + e)]) * k[e];
      dot *= scale;
      if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
      s.push_back(dot);
      mx = std::max(mx, dot);
    }
    double sum = 0, acc = 0;
    for (int j = jb; j < je; ++j) {
      const double w = std::exp(s[static_cast<size_t>(j - jb)] - mx);
      sum += w;
      acc += w * vf[static_cast<size_t>(slots[static_cast<size_t>(j)] * kvw + kvh * hd + d)];
    }
    return sum > 0 ? acc / sum : 0.0;
  }
};

void check_case(const Case& c) {
  INFO(c.name);
  std::mt19937 rng(static_cast<unsigned>(c.n_kv * 131 + c.head_dim));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Pass ps(c);
  const int64_t kvw = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  const int64_t n_slots = c.permuted ? 2 * c.n_kv + 3 : c.n_kv;
  std::vector<float> k(static_cast<size_t>(n_slots * kvw)), v(k.size());
  for (float& x : k) x = dist(rng);
  for (float& x : v) x = dist(rng);
  std::vector<float> u(static_cast<size_t>(c.head_dim));
  for (float& x : u) x = dist(rng) / std::sqrt(static_cast<float>(c.head_dim));
  if (c.rising)  // slot of position j: its keys, every KV head, are j/8 u + noise
    for (int j = 0; j < c.n_kv; ++j)
      for (int64_t e = 0; e < kvw; ++e) {
        const int slot = c.permuted ? -1 : j;
        if (slot >= 0)
          k[static_cast<size_t>(slot * kvw + e)] =
              j / 8.0f * u[static_cast<size_t>(e % c.head_dim)] + 0.01f * dist(rng);
      }
  ps.kc = make_cache(c.kv, k, n_slots, kvw, &ps.kf);
  ps.vc = make_cache(c.kv, v, n_slots, kvw, &ps.vf);
  ps.kv_row_bytes = ps.kc.size() / static_cast<size_t>(n_slots);
  ps.slots.resize(static_cast<size_t>(n_slots));
  std::iota(ps.slots.begin(), ps.slots.end(), 0);
  if (c.permuted) std::shuffle(ps.slots.begin(), ps.slots.end(), rng);
  ps.slots.resize(static_cast<size_t>(c.n_kv));
  ps.q.resize(static_cast<size_t>(c.n_q) * c.n_heads * c.head_dim);
  for (size_t i = 0; i < ps.q.size(); ++i)
    ps.q[i] = c.rising ? u[i % static_cast<size_t>(c.head_dim)] * 4.0f : dist(rng);
  for (int r = 0; r < c.n_q; ++r) ps.positions.push_back(c.n_kv - c.n_q + r);

  std::vector<int> all(static_cast<size_t>(c.n_q));
  std::iota(all.begin(), all.end(), 0);
  const std::vector<float> out = ps.run(all);
  const int qw = c.n_heads * c.head_dim;
  int bad = 0;
  double worst = 0;
  for (int r = 0; r < c.n_q; ++r)
    for (int h = 0; h < c.n_heads; ++h)
      for (int d = 0; d < c.head_dim; ++d) {
        const double want = ps.reference(r, h, d), got = out[static_cast<size_t>(r * qw + h * c.head_dim + d)];
        const double err = std::fabs(got - want);
        worst = std::max(worst, err);
        if (!(err <= 2e-5 + 1e-7 * c.n_kv)) {
          if (bad < 3) WARN("row " << r << " head " << h << " element " << d << ": got " << got << " want " << want);
          ++bad;
        }
      }
  CHECK(bad == 0);
  // Each row alone (a decode step, a cache hit's suffix) gives the bits it got in the batch.
  for (int r = 0; r < c.n_q; r += std::max(1, c.n_q / 4)) {
    INFO("row " << r << " alone");
    const std::vector<float> one = ps.run({r});
    CHECK(std::memcmp(one.data(), &out[static_cast<size_t>(r * qw)], one.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("CUDA attention kernels on the host: every case against double precision, each row alone as in its batch") {
  const Case cases[] = {
      {"Gemma heads 4/1 x 256, prefill of 40, F16", 4, 1, 256, 40, 40, 0, 0.0f, DType::F16, false},
      {"Gemma, decode-like rows over 300 keys, window 7, softcap 50, F32, shuffled slots", 4, 1, 256, 300, 5, 7, 50.0f,
       DType::F32, true},
      {"Qwen heads 14/2 x 64, 300 keys (split), Q8_0, shuffled", 14, 2, 64, 300, 3, 0, 0.0f, DType::Q8_0, true},
      {"SmolLM2 heads 9/3 x 64, decode over 1000 keys (8 splits), F16", 9, 3, 64, 1000, 1, 0, 0.0f, DType::F16, false},
      {"head_dim 16, 2/2 heads, 50 rows over 200 keys: rows in launches of 14 (scratch bound)", 2, 2, 16, 200, 50, 0,
       0.0f, DType::F16, true},
      {"head_dim 512, one head, 20 rows", 1, 1, 512, 20, 20, 0, 0.0f, DType::F32, false},
      {"window 1: each row sees itself", 2, 1, 32, 30, 30, 1, 0.0f, DType::F16, false},
      {"head_dim 96 (3 of 4 lanes' elements), window 100 over 260 keys", 3, 1, 96, 260, 9, 100, 30.0f, DType::F16,
       true},
      {"rising scores, heads 3/1 x 64, window 45 over 120 keys: blocks mix rows whose ranges start apart", 3, 1, 64,
       120, 12, 45, 0.0f, DType::F32, false, true},
  };
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("CUDA StoreKv kernels on the host write the cache rows as the CPU's conversions") {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    INFO(dtype_name(type));
    const int64_t n_tok = 5, width = 96, n_slots = 9;
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> k(static_cast<size_t>(n_tok * width)), v(k.size());
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    std::vector<float> unused;
    const std::vector<uint8_t> want_k = make_cache(type, k, n_tok, width, &unused);
    const std::vector<uint8_t> want_v = make_cache(type, v, n_tok, width, &unused);
    const size_t rb = want_k.size() / n_tok;
    std::vector<uint8_t> kc(rb * n_slots, 0xCD), vc(kc.size(), 0xCD);
    const std::vector<int32_t> slots{7, 0, 3, 8, 5};
    launch_store_kv(DevRows{k.data(), width, n_tok, width * 4}, DevRows{v.data(), width, n_tok, width * 4},
                    slots.data(), type, DevRows{kc.data(), width, n_slots, rb}, DevRows{vc.data(), width, n_slots, rb},
                    nullptr);
    for (int64_t t = 0; t < n_tok; ++t) {
      CHECK(std::memcmp(&kc[slots[t] * rb], &want_k[t * rb], rb) == 0);
      CHECK(std::memcmp(&vc[slots[t] * rb], &want_v[t * rb], rb) == 0);
    }
    CHECK(kc[1 * rb] == 0xCD);  // slot 1: untouched
  }
}
