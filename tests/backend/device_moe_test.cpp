// The device backend's mixture-of-experts ops (backend.h: MoeRoute, MatMulExperts,
// MoeCombine) against their references: MoeRoute and MoeCombine against the scalar rows of
// backends/cpu/moe_ref.h, MatMulExperts against MatMul on each expert's slice of the stacked
// weights (the device's own MatMul bit for bit, the CPU's within MatMul's tolerance). These
// run the MoE ops on the device alone, so they do not need the CPU backend to have them.
// Skipped when no device can run hearth.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/moe_ref.h"
#include "device_pair.h"
#include "matmul_tolerance.h"

namespace {

using namespace hearth;
using hearth::test::DevicePair;
using hearth::test::expect_close;
using hearth::test::matmul_tol;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Router logits [n_tok, n_expert]: random, then rows with exact ties (all equal; pairs of
// equal values; all but one underflowing to 0), a NaN, and -inf, where the order rules (ties to the lower id, NaN as
// -inf) decide.
std::vector<float> router_logits(DevicePair& f, int64_t n_tok, int64_t n_expert) {
  std::vector<float> l = f.random(n_tok * n_expert, 2.0f);
  auto row = [&](int64_t t) { return l.data() + t * n_expert; };
  for (int64_t e = 0; e < n_expert; ++e) row(0)[e] = 0.5f;
  for (int64_t e = 0; e + 1 < n_expert; e += 2) row(1)[e + 1] = row(1)[e];
  row(2)[n_expert / 2] = std::numeric_limits<float>::quiet_NaN();
  row(3)[n_expert - 1] = 80.0f;  // every other probability underflows to 0: ties at zero
  row(3)[0] = -std::numeric_limits<float>::infinity();
  return l;
}

// The device's MoeRoute weights may differ from the reference's by the device's exp (not
// correctly rounded: GLSL allows 3 + 2|x| ulp, CUDA's expf 2 ulp) and division (GLSL: 2.5
// ulp). p_e = exp(x_e) / s, x_e = l_e - max: p_e's error is its exp's plus s's (a weighted
// mean of the exps' errors, at most the largest), plus a few roundings; the renormalised
// weight doubles that. In ulp of the weight, with X the largest |x| of the row:
// 2 * (2 * (3 + 2X) + 3) + 3 (X over the finite logits).
double route_tol(const float* logits, int64_t n_expert, float weight) {
  float m = -std::numeric_limits<float>::infinity(), lo = std::numeric_limits<float>::infinity();
  for (int64_t e = 0; e < n_expert; ++e) {
    if (logits[e] > m) m = logits[e];
    if (std::isfinite(logits[e]) && logits[e] < lo) lo = logits[e];  // exp(-inf) is exact
  }
  const double x = std::isfinite(m - lo) ? double(m) - lo : 0.0;
  const double ulps = 2 * (2 * (3 + 2 * x) + 3) + 3;
  if (std::isnan(weight)) return 1.0;  // then the device must give NaN too (expect_close)
  return ulps * std::ldexp(std::fabs(double(weight)), -23) + 1e-45;
}

struct RouteOut {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

RouteOut route_on_device(DevicePair& f, const std::vector<float>& logits, int64_t n_tok, int64_t n_expert, int64_t k,
                         bool renorm) {
  Op op{OpKind::MoeRoute};
  op.src0 = f.f32(n_expert, n_tok, logits);
  op.dst = f.tensor(DType::F32, k, n_tok);
  op.src1 = f.tensor(DType::I32, k, n_tok);
  op.i0 = renorm ? 1 : 0;
  op.f0 = 6.103515625e-05f;  // 2^-14, as llama.cpp clamps
  f.run_dev(op);
  return {f.read_dev_i32(op.src1), f.read_dev(op.dst)};
}

}  // namespace

TEST_CASE(DEVICE " MoeRoute picks the reference's experts, ties to the lower id, NaN last", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t n_tok = 23;
  for (const int64_t n_expert : {int64_t{8}, int64_t{61}, int64_t{128}}) {
    const std::vector<float> logits = router_logits(f, n_tok, n_expert);
    for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{8}}) {
      for (const bool renorm : {false, true}) {
        const std::string what = "MoeRoute n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
                                 (renorm ? " renormalised" : "");
        INFO(what);
        const RouteOut got = route_on_device(f, logits, n_tok, n_expert, k, renorm);
        std::vector<int32_t> ids(static_cast<size_t>(n_tok * k));
        std::vector<float> w(static_cast<size_t>(n_tok * k)), probs(static_cast<size_t>(n_expert));
        for (int64_t t = 0; t < n_tok; ++t)
          cpu::moe_route_row(&logits[t * n_expert], n_expert, k, renorm, 6.103515625e-05f, probs.data(), &ids[t * k],
                             &w[t * k]);
        CHECK(got.ids == ids);
        // Token 2 (a NaN logit): every weight NaN on both; set aside so the rest is measured.
        std::vector<float> dev_w = got.weights;
        for (int64_t j = 0; j < k; ++j) {
          CHECK(std::isnan(dev_w[2 * k + j]));
          CHECK(std::isnan(w[2 * k + j]));
          dev_w[2 * k + j] = w[2 * k + j] = 0.0f;
        }
        expect_close(
            w, dev_w, [&](size_t i) { return route_tol(&logits[(i / k) * n_expert], n_expert, w[i]); }, what);
        // Batch invariance: each of the first rows routed alone gives the very bits it got in
        // the batch.
        for (int64_t t = 0; t < 5; ++t) {
          const std::vector<float> one(logits.begin() + t * n_expert, logits.begin() + (t + 1) * n_expert);
          const RouteOut alone = route_on_device(f, one, 1, n_expert, k, renorm);
          CHECK(std::vector<int32_t>(got.ids.begin() + t * k, got.ids.begin() + (t + 1) * k) == alone.ids);
          CHECK(same_bits(std::vector<float>(got.weights.begin() + t * k, got.weights.begin() + (t + 1) * k),
                          alone.weights));
        }
      }
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " MoeCombine equals the reference bit for bit: products rounded, added in rank order", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t n_tok = 9, d = 203;
  for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{8}}) {
    INFO("k " << k);
    // Values whose products and sums round (a fused multiply-add would change bits).
    const std::vector<float> x = f.random(n_tok * k * d, 3.0f), w = f.random(n_tok * k);
    Op op{OpKind::MoeCombine};
    op.src0 = f.f32(d, n_tok * k, x, (d + 5) * sizeof(float), 16);  // rows strided, offset
    op.src1 = f.f32(k, n_tok, w);
    op.dst = f.tensor(DType::F32, d, n_tok);
    f.run_dev(op);
    std::vector<float> want(static_cast<size_t>(n_tok * d));
    for (int64_t t = 0; t < n_tok; ++t) cpu::moe_combine_row(&x[t * k * d], d, &w[t * k], k, d, &want[t * d]);
    CHECK(same_bits(f.read_dev(op.dst), want));
  }
  f.finish();
}

namespace {

// Every (token, rank) pair's expert, some out of range (-1, n_expert, a large id): those
// rows must come out zero.
std::vector<int32_t> expert_ids(DevicePair& f, int64_t n_tok, int64_t k, int64_t n_expert) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_expert - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n_tok * k));
  for (int32_t& id : ids) id = pick(f.rng());
  if (n_tok > 2) {
    ids[1] = -1;
    ids[k + 0] = static_cast<int32_t>(n_expert);
    ids[2 * k + k - 1] = 1 << 30;
  }
  return ids;
}

// One MatMulExperts case: checks each output row against MatMul of its expert's slice on
// its input row, run on both backends, and a token's rows computed alone.
void check_experts(DevicePair& f, DType type, int64_t n_in, int64_t n_out, int64_t n_expert, int64_t k, int64_t n_tok,
                   int32_t per_pair, bool tf32) {
  const std::string what = std::string("MatMulExperts ") + dtype_name(type) + " n_in " + std::to_string(n_in) +
                           " n_tok " + std::to_string(n_tok) + " i1 " + std::to_string(per_pair);
  INFO(what);
  std::vector<float> wd;
  const Tensor w = f.weights(type, n_in, n_expert * n_out, f.random(n_expert * n_out * n_in, 0.5f), &wd);
  const int64_t n_x = per_pair ? n_tok * k : n_tok;
  const std::vector<float> x = f.random(n_x * n_in);
  const std::vector<int32_t> ids = expert_ids(f, n_tok, k, n_expert);
  Op op{OpKind::MatMulExperts};
  op.src0 = w;
  op.src1 = f.f32(n_in, n_x, x);
  op.src2 = f.tensor(DType::I32, k, n_tok);
  for (int64_t t = 0; t < n_tok; ++t) f.write_row(op.src2, t, &ids[t * k]);
  op.dst = f.tensor(DType::F32, n_out, n_tok * k);
  op.i1 = per_pair;
  f.run_dev(op);
  const std::vector<float> got = f.read_dev(op.dst);

  // MatMul of every expert's slice with all input rows, on both backends.
  std::vector<std::vector<float>> dev_ref, cpu_ref;
  for (int64_t e = 0; e < n_expert; ++e) {
    Op mm{OpKind::MatMul};
    mm.src0 = w.slice_rows(e * n_out, n_out);
    mm.src1 = op.src1;
    mm.dst = f.tensor(DType::F32, n_out, n_x);
    f.run(mm);
    dev_ref.push_back(f.read_dev(mm.dst));
    cpu_ref.push_back(f.read_cpu(mm.dst));
  }
  std::vector<float> want_dev(got.size()), want_cpu(got.size());
  for (int64_t p = 0; p < n_tok * k; ++p) {
    const int32_t e = ids[p];
    const int64_t r = per_pair ? p : p / k;
    for (int64_t o = 0; o < n_out; ++o) {
      const bool known = e >= 0 && e < n_expert;
      want_dev[p * n_out + o] = known ? dev_ref[e][r * n_out + o] : 0.0f;
      want_cpu[p * n_out + o] = known ? cpu_ref[e][r * n_out + o] : 0.0f;
    }
  }
  // (The tensor-core MatMul is not the SIMT kernel MatMulExperts shares: cuda_backend.cpp.)
  if (!tf32) CHECK(same_bits(got, want_dev));
  expect_close(
      want_cpu, got,
      [&](size_t i) {
        const int64_t p = static_cast<int64_t>(i) / n_out, o = static_cast<int64_t>(i) % n_out;
        const int32_t e = ids[p];
        if (e < 0 || e >= n_expert) return 1e-30;
        const int64_t r = per_pair ? p : p / k;
        return matmul_tol(type, &wd[(e * n_out + o) * n_in], &x[r * n_in], n_in, tf32);
      },
      what + " against the CPU's MatMul");

  // Batch invariance: the last token alone (its ids and input rows) gives the very bits.
  const int64_t t = n_tok - 1;
  Op one = op;
  const int64_t x0 = per_pair ? t * k : t, nx1 = per_pair ? k : 1;
  one.src1 = f.f32(n_in, nx1, std::vector<float>(x.begin() + x0 * n_in, x.begin() + (x0 + nx1) * n_in));
  one.src2 = f.tensor(DType::I32, k, 1);
  f.write_row(one.src2, 0, &ids[t * k]);
  one.dst = f.tensor(DType::F32, n_out, k);
  f.run_dev(one);
  CHECK(same_bits(f.read_dev(one.dst), std::vector<float>(got.begin() + t * k * n_out, got.end())));
}

}  // namespace

TEST_CASE(DEVICE " MatMulExperts gives MatMul's outputs for each pair's expert, and zeros for unknown experts",
          DEVICE_TAG) {
  NEED_DEVICE(f);
  const bool tf32 = f.dev().info().name.find("tf32") != std::string::npos;
  for (const DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    if (!f.dev().caps().supports_weight(type)) {
      WARN(DEVICE " backend does not support " << dtype_name(type) << " weights; not tested");
      continue;
    }
    for (const int32_t per_pair : {0, 1}) {
      // 5 experts of 37 rows (odd, past a workgroup's rows), k = 3; decode and a batch.
      check_experts(f, type, 512, 37, 5, 3, 1, per_pair, tf32);
      check_experts(f, type, 512, 37, 5, 3, 11, per_pair, tf32);
      // Several tiles of 8 pairs per expert where a backend groups a batch's pairs by expert.
      if (type == DType::Q8_0 || type == DType::Q4_K) check_experts(f, type, 256, 37, 5, 3, 40, per_pair, tf32);
    }
  }
  f.finish();
}

namespace {

struct MoeFfn {
  Tensor router, gate, up, down;  // router F32 [n_expert, n_embd]; experts stacked
  int64_t n_embd = 0, n_ff = 0, n_expert = 0, k = 0;
};

// One Qwen3-MoE FFN for the tokens of x as one graph: router logits, MoeRoute, the gate and
// up experts (one input row per token), SiluMul, the down experts (a row per pair),
// MoeCombine, the residual. Its intermediates are tensors of their own, filled with a
// pattern, so a dispatch that reads one before it is written gives garbage. out: the result.
Graph moe_ffn_graph(DevicePair& f, const MoeFfn& m, const Tensor& x, Tensor* out) {
  const int64_t n = x.rows, pairs = n * m.k;
  Graph g;
  Op logits{OpKind::MatMul};
  logits.src0 = m.router, logits.src1 = x, logits.dst = f.tensor(DType::F32, m.n_expert, n);
  Op route{OpKind::MoeRoute};
  route.src0 = logits.dst, route.dst = f.tensor(DType::F32, m.k, n), route.src1 = f.tensor(DType::I32, m.k, n);
  route.i0 = 1, route.f0 = 6.103515625e-05f;
  Op gate{OpKind::MatMulExperts}, up{OpKind::MatMulExperts}, down{OpKind::MatMulExperts};
  gate.src0 = m.gate, gate.src1 = x, gate.src2 = route.src1, gate.dst = f.tensor(DType::F32, m.n_ff, pairs);
  up = gate;
  up.src0 = m.up, up.dst = f.tensor(DType::F32, m.n_ff, pairs);
  Op act{OpKind::SiluMul};
  act.src0 = gate.dst, act.src1 = up.dst, act.dst = f.tensor(DType::F32, m.n_ff, pairs);
  down.src0 = m.down, down.src1 = act.dst, down.src2 = route.src1, down.i1 = 1;
  down.dst = f.tensor(DType::F32, m.n_embd, pairs);
  Op combine{OpKind::MoeCombine};
  combine.src0 = down.dst, combine.src1 = route.dst, combine.dst = f.tensor(DType::F32, m.n_embd, n);
  Op res{OpKind::Add};
  res.src0 = combine.dst, res.src1 = x, res.dst = f.tensor(DType::F32, m.n_embd, n);
  g.ops = {logits, route, gate, up, act, down, combine, res};
  *out = res.dst;
  return g;
}

}  // namespace

TEST_CASE("A whole MoE FFN in one " DEVICE " graph equals it op by op, and a token alone equals it in the batch",
          DEVICE_TAG) {
  NEED_DEVICE(f);
  MoeFfn m;
  m.n_embd = 256, m.n_ff = 256, m.n_expert = 8, m.k = 3;
  m.router = f.f32(m.n_embd, m.n_expert, f.random(m.n_expert * m.n_embd, 0.2f));
  m.gate = f.weights(DType::Q4_K, m.n_embd, m.n_expert * m.n_ff, f.random(m.n_expert * m.n_ff * m.n_embd), nullptr);
  m.up = f.weights(DType::Q4_K, m.n_embd, m.n_expert * m.n_ff, f.random(m.n_expert * m.n_ff * m.n_embd), nullptr);
  m.down = f.weights(DType::Q6_K, m.n_ff, m.n_expert * m.n_embd, f.random(m.n_expert * m.n_embd * m.n_ff), nullptr);
  const int64_t n_tok = 9;
  const std::vector<float> xv = f.random(n_tok * m.n_embd);
  const Tensor x = f.f32(m.n_embd, n_tok, xv);

  Tensor out;
  const Graph whole = moe_ffn_graph(f, m, x, &out);
  REQUIRE(f.try_run_dev(whole).ok());
  const std::vector<float> got = f.read_dev(out);
  Tensor out2;
  const Graph again = moe_ffn_graph(f, m, x, &out2);
  for (const Op& op : again.ops) f.run_dev(op);
  CHECK(same_bits(got, f.read_dev(out2)));
  // A wrong route, expert or missing barrier moves the output by O(1): it must be finite
  // and differ from the residual alone.
  bool finite = true, moved = false;
  for (size_t i = 0; i < got.size(); ++i) {
    finite = finite && std::isfinite(got[i]);
    moved = moved || got[i] != xv[i];
  }
  CHECK(finite);
  CHECK(moved);

  for (const int64_t t : {int64_t{0}, n_tok - 1}) {
    INFO("token " << t << " alone");
    const Tensor xt =
        f.f32(m.n_embd, 1, std::vector<float>(xv.begin() + t * m.n_embd, xv.begin() + (t + 1) * m.n_embd));
    Tensor o1;
    REQUIRE(f.try_run_dev(moe_ffn_graph(f, m, xt, &o1)).ok());
    CHECK(same_bits(f.read_dev(o1), std::vector<float>(got.begin() + t * m.n_embd, got.begin() + (t + 1) * m.n_embd)));
  }
  f.finish();
}
