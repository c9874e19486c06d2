// The CPU backend's mixture-of-experts ops (backends/backend.h: MoeRoute, MatMulExperts,
// MoeCombine) against cases computed by hand and against the plain MatMul op: an expert's
// output for a row must be the float MatMul gives for that expert's matrix and that row
// alone, whatever else is in the batch.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"
#include "quant/quant_test_util.h"

namespace {

using namespace hearth;

struct Moe {
  std::unique_ptr<Backend> be = cpu::make_cpu_backend({2});
  std::vector<std::unique_ptr<Buffer>> buffers;

  Tensor make(DType type, int64_t ne0, int64_t rows) {
    Tensor t{nullptr, 0, type, ne0, rows, row_bytes(type, ne0)};
    buffers.push_back(std::move(*be->alloc(t.row_stride * static_cast<size_t>(rows), BufferKind::Activations)));
    t.buffer = buffers.back().get();
    // NaN everywhere, so a row an op forgets to write shows.
    std::vector<uint8_t> fill(t.row_stride * static_cast<size_t>(rows), 0xff);
    REQUIRE(be->write(*t.buffer, 0, fill.data(), fill.size()).ok());
    return t;
  }
  template <class T>
  Tensor make_from(DType type, int64_t ne0, int64_t rows, const std::vector<T>& v) {
    Tensor t = make(type, ne0, rows);
    REQUIRE(v.size() * sizeof(T) == t.row_stride * static_cast<size_t>(rows));
    REQUIRE(be->write(*t.buffer, 0, v.data(), v.size() * sizeof(T)).ok());
    return t;
  }
  template <class T = float>
  std::vector<T> read(const Tensor& t) {
    std::vector<T> v(t.row_stride * static_cast<size_t>(t.rows) / sizeof(T));
    REQUIRE(be->read(*t.buffer, t.offset, v.data(), v.size() * sizeof(T)).ok());
    return v;
  }
  void run(const Op& op) {
    Graph g;
    g.ops.push_back(op);
    const Status st = be->execute(g);
    INFO((st ? std::string() : st.error().message));
    REQUIRE(st.ok());
  }

  struct Route {
    std::vector<int32_t> ids;
    std::vector<float> w;
  };
  Route route(const std::vector<float>& logits, int64_t n_expert, int64_t k, bool renorm, float min_sum) {
    const auto n_tok = static_cast<int64_t>(logits.size()) / n_expert;
    Op op{OpKind::MoeRoute};
    op.src0 = make_from(DType::F32, n_expert, n_tok, logits);
    op.src1 = make(DType::I32, k, n_tok);
    op.dst = make(DType::F32, k, n_tok);
    op.i0 = renorm ? 1 : 0;
    op.f0 = min_sum;
    run(op);
    return {read<int32_t>(op.src1), read(op.dst)};
  }
};

struct LevelGuard {
  cpu::SimdLevel saved = cpu::active_simd_level();
  ~LevelGuard() { cpu::set_simd_level(saved); }
};

constexpr float kClamp = 1.0f / 16384.0f;  // llama.cpp's clamp of the renormalising sum

}  // namespace

TEST_CASE("MoeRoute picks the k most probable experts, ties to the lower id, and renormalises their weights") {
  Moe m;
  SECTION("equal logits: ids in order, exact quarters and halves") {
    const auto r = m.route({0, 0, 0, 0}, 4, 2, true, kClamp);
    CHECK(r.ids == std::vector<int32_t>{0, 1});
    CHECK(r.w == std::vector<float>{0.5f, 0.5f});
    CHECK(m.route({0, 0, 0, 0}, 4, 2, false, kClamp).w == std::vector<float>{0.25f, 0.25f});
  }
  SECTION("the renormalising sum is clamped below at f0") {
    // Chosen sum 0.5, clamp 0.75: each weight 0.25 / 0.75.
    CHECK(m.route({0, 0, 0, 0}, 4, 2, true, 0.75f).w == std::vector<float>{0.25f / 0.75f, 0.25f / 0.75f});
  }
  SECTION("descending probability, ties to the lower id, over several tokens") {
    const std::vector<float> logits = {1, 3,  3, 1, 2,  //
                                       5, -1, 0, 5, 7};
    const auto r = m.route(logits, 5, 3, false, kClamp);
    CHECK(r.ids == std::vector<int32_t>{1, 2, 4, 4, 0, 3});
    // Token 0's probabilities in double: e^l / sum e^l.
    const double s = 2 * std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
    CHECK(r.w[0] == Approx(std::exp(3.0) / s).epsilon(1e-6));
    CHECK(r.w[0] == r.w[1]);
    CHECK(r.w[2] == Approx(std::exp(2.0) / s).epsilon(1e-6));
  }
  SECTION("k = 1 gives the argmax with weight 1 when renormalised") {
    const auto r = m.route({0.5f, -1.0f, 2.0f}, 3, 1, true, kClamp);
    CHECK(r.ids == std::vector<int32_t>{2});
    CHECK(r.w == std::vector<float>{1.0f});
    const double s = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);
    CHECK(m.route({0.5f, -1.0f, 2.0f}, 3, 1, false, kClamp).w[0] == Approx(std::exp(2.0) / s).epsilon(1e-6));
  }
  SECTION("k = n_expert ranks every expert; weights renormalised sum to 1") {
    const float inf = std::numeric_limits<float>::infinity();
    const auto r = m.route({-2, 4, 1, 4, -inf}, 5, 5, true, kClamp);
    CHECK(r.ids == std::vector<int32_t>{1, 3, 2, 0, 4});
    CHECK(r.w[4] == 0.0f);  // exp(-inf) = 0
    CHECK(r.w[0] + r.w[1] + r.w[2] + r.w[3] == Approx(1.0f).epsilon(1e-6));
  }
  SECTION("a NaN logit makes every probability NaN: ids stay in range, lowest first") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto r = m.route({0, nan, 3, 1}, 4, 2, true, kClamp);
    CHECK(r.ids == std::vector<int32_t>{0, 1});
    CHECK(std::isnan(r.w[0]));
    CHECK(std::isnan(r.w[1]));
  }
}

namespace {

// n_expert stacked matrices of n_out rows of n_in elements in type wt, uploaded as weights
// (as a model's mapping is), prepared for MatMul (repacked where this CPU has the layout)
// when `prepare`.
Tensor stacked_experts(Moe& m, DType wt, int64_t n_expert, int64_t n_out, int64_t n_in, bool prepare,
                       std::vector<uint8_t>& bytes) {
  const int64_t rows = n_expert * n_out;
  const size_t row = row_bytes(wt, n_in);
  if (bytes.empty()) {
    std::mt19937 rng(static_cast<uint32_t>(rows + n_in));
    std::normal_distribution<float> d(0.0f, 0.5f);
    std::vector<float> w(static_cast<size_t>(n_in));
    bytes.resize(row * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : w) x = d(rng);
      cpu::quantize_row(wt, w.data(), bytes.data() + static_cast<size_t>(r) * row, n_in);
    }
  }
  m.buffers.push_back(std::move(*m.be->upload_weights(bytes.data(), bytes.size())));
  Tensor t{m.buffers.back().get(), 0, wt, n_in, rows, row};
  if (prepare) REQUIRE(m.be->prepare_matmul_weights(std::span<const Tensor>(&t, 1), false).ok());
  return t;
}

// What the plain MatMul op gives for rows [e * n_out, (e + 1) * n_out) of w and one input row.
std::vector<float> matmul_one_row(Moe& m, const Tensor& w, int64_t e, int64_t n_out, const float* x) {
  Op op{OpKind::MatMul};
  op.src0 = w.slice_rows(e * n_out, n_out);
  op.src1 = m.make_from(DType::F32, w.ne0, 1, std::vector<float>(x, x + w.ne0));
  op.dst = m.make(DType::F32, n_out, 1);
  m.run(op);
  return m.read(op.dst);
}

}  // namespace

// Batch invariance included: each (token, rank) output of a batch of many tokens, some
// sharing experts, is compared with MatMul run on that one row alone.
TEST_CASE("MatMulExperts gives each row MatMul's floats for its expert alone, repacked or not, at every level") {
  LevelGuard guard;
  const int64_t n_expert = 6, n_in = 512, k = 2;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (DType wt : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    for (int64_t n_out : {32, 24}) {  // whole 16-row groups (repacked kernels) and not
      std::vector<uint8_t> bytes;
      Moe plain, prepared;
      const Tensor w_plain = stacked_experts(plain, wt, n_expert, n_out, n_in, false, bytes);
      const Tensor w_prep = stacked_experts(prepared, wt, n_expert, n_out, n_in, true, bytes);
      for (cpu::SimdLevel level : test::supported_levels()) {
        cpu::set_simd_level(level);
        for (int64_t n_tok : {1, 9}) {
          // Ids: tokens share experts; the last token has one id out of range.
          std::vector<int32_t> ids(static_cast<size_t>(n_tok * k));
          for (int64_t t = 0; t < n_tok; ++t) {
            ids[t * k] = static_cast<int32_t>((t * 5) % n_expert);
            ids[t * k + 1] = static_cast<int32_t>((t * 5 + 1 + t % 3) % n_expert);
          }
          if (n_tok > 1) ids.back() = static_cast<int32_t>(n_expert);
          if (n_tok > 1) ids[0] = -1;
          for (int per_slot : {0, 1}) {
            INFO(dtype_name(wt) << " n_out " << n_out << " level " << cpu::simd_level_name(level) << " tokens " << n_tok
                                << " i1 " << per_slot);
            const int64_t x_rows = per_slot ? n_tok * k : n_tok;
            std::vector<float> x(static_cast<size_t>(x_rows * n_in));
            for (float& v : x) v = d(rng);
            for (int p = 0; p < 2; ++p) {
              Moe& m = p == 0 ? plain : prepared;
              Op op{OpKind::MatMulExperts};
              op.src0 = p == 0 ? w_plain : w_prep;
              op.src1 = m.make_from(DType::F32, n_in, x_rows, x);
              op.src2 = m.make_from(DType::I32, k, n_tok, ids);
              op.dst = m.make(DType::F32, n_out, n_tok * k);
              op.i1 = per_slot;
              m.run(op);
              const std::vector<float> y = m.read(op.dst);
              for (int64_t s = 0; s < n_tok * k; ++s) {
                const int32_t e = ids[static_cast<size_t>(s)];
                std::vector<float> want(static_cast<size_t>(n_out), 0.0f);
                if (e >= 0 && e < n_expert)
                  want =
                      matmul_one_row(plain, w_plain, e, n_out, &x[static_cast<size_t>((per_slot ? s : s / k) * n_in)]);
                INFO("prepared " << p << " slot " << s << " expert " << e);
                REQUIRE(std::memcmp(&y[static_cast<size_t>(s * n_out)], want.data(), want.size() * sizeof(float)) == 0);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("MoeCombine adds the weighted expert rows in rank order, each product rounded") {
  Moe m;
  // Token 0: 1e8 + 1 rounds to 1e8 in f32, so rank order gives (1e8 + 1) - 1e8 = 0 where
  // another order would give 1. Token 1: k weights scale their rows.
  const int64_t k = 3, d = 2;
  const std::vector<float> x = {1e8f, 2, 1, 3, -1e8f, 4,  //
                                1,    1, 2, 2, 4,     4};
  const std::vector<float> w = {1, 1, 1, 0.5f, 0.25f, 2};
  Op op{OpKind::MoeCombine};
  op.src0 = m.make_from(DType::F32, d, 2 * k, x);
  op.src1 = m.make_from(DType::F32, k, 2, w);
  op.dst = m.make(DType::F32, d, 2);
  m.run(op);
  CHECK(m.read(op.dst) == std::vector<float>{0.0f, 9.0f, 9.0f, 9.0f});
}

TEST_CASE("The mixture-of-experts ops refuse misshapen operands by name, before running") {
  Moe m;
  const int64_t n_tok = 2, n_expert = 4, k = 2, n_in = 32, n_out = 16;
  auto refused = [&](const Op& op, const std::string& what) {
    Graph g;
    g.ops.push_back(op);
    const Status st = m.be->execute(g);
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.error().message, Catch::Contains(what));
  };
  Op route{OpKind::MoeRoute};
  route.src0 = m.make(DType::F32, n_expert, n_tok);
  route.src1 = m.make(DType::I32, k, n_tok);
  route.dst = m.make(DType::F32, k, n_tok);
  {
    Op op = route;
    op.dst = m.make(DType::F32, n_expert + 1, n_tok);
    op.src1 = m.make(DType::I32, n_expert + 1, n_tok);
    refused(op, "k = 5 experts per token, of 4 experts");
  }
  {
    Op op = route;
    op.src1 = m.make(DType::F32, k, n_tok);
    refused(op, "src1 (expert ids) must be I32");
  }
  {
    Op op = route;
    op.i0 = 2;
    refused(op, "i0 (renormalise) must be 0 or 1");
  }
  Op experts{OpKind::MatMulExperts};
  std::vector<uint8_t> bytes;
  experts.src0 = stacked_experts(m, DType::F32, n_expert, n_out, n_in, false, bytes);
  experts.src1 = m.make(DType::F32, n_in, n_tok);
  experts.src2 = route.src1;
  experts.dst = m.make(DType::F32, n_out, n_tok * k);
  {
    Op op = experts;
    op.dst = m.make(DType::F32, 24, n_tok * k);  // 64 stacked rows are not whole experts of 24
    refused(op, "not a whole number of experts of 24");
  }
  {
    Op op = experts;
    op.i1 = 1;  // a row per (token, rank) wanted, src1 has a row per token
    refused(op, "src1 has 2 rows, the op needs 4");
  }
  {
    Op op = experts;
    op.src1 = m.make(DType::F32, 2 * n_in, n_tok);
    refused(op, "src1 rows hold 64 elements, the weights' rows 32");
  }
  Op combine{OpKind::MoeCombine};
  combine.src0 = m.make(DType::F32, n_out, n_tok * k - 1);
  combine.src1 = route.dst;
  combine.dst = m.make(DType::F32, n_out, n_tok);
  refused(combine, "src0 (expert outputs) has 3 rows, the op needs 4");
}
