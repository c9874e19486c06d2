// compute_distribution against a plain reference that sorts the whole vocabulary and applies
// top-k -> top-p -> min-p -> temperature literally, over many sizes, ties, -inf and NaN logits.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/distribution.h"

using hearth::Candidate;
using hearth::SamplingParams;

namespace {

// Reference: sort everything best first (logit desc, id asc), cut, softmax in double.
std::vector<Candidate> reference(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<Candidate> c;
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (!std::isnan(logits[i])) c.push_back({i, logits[i], 0.0f});
  }
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  if (p.temperature <= 0.0f) c.resize(1);
  if (p.top_k > 0 && p.top_k < static_cast<int32_t>(c.size())) c.resize(p.top_k);
  const double max = c[0].logit;
  if (p.top_p < 1.0f) {
    double z = 0.0;
    for (const Candidate& x : c) z += std::exp(x.logit - max);
    double cum = 0.0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += std::exp(c[i].logit - max);
      if (cum >= p.top_p * z) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (p.min_p > 0.0f) {
    size_t keep = 1;
    while (keep < c.size() && std::exp(c[keep].logit - max) >= p.min_p) ++keep;
    c.resize(keep);
  }
  double total = 0.0;
  std::vector<double> w;
  for (const Candidate& x : c) {
    w.push_back(p.temperature <= 0.0f ? 1.0 : std::exp((x.logit - max) / p.temperature));
    total += w.back();
  }
  for (size_t i = 0; i < c.size(); ++i) c[i].p = static_cast<float>(w[i] / total);
  return c;
}

std::vector<Candidate> by_id(std::vector<Candidate> c) {
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  return c;
}

}  // namespace

TEST_CASE("compute_distribution matches the full-sort reference", "[sampling]") {
  std::mt19937_64 rng(123);
  std::vector<Candidate> got;
  int checked = 0;
  for (int32_t n : {1, 2, 7, 100, 1000, 5000}) {
    for (int kind = 0; kind < 4; ++kind) {
      // kind 0: normal logits; 1: quantized (many ties); 2: with -inf; 3: with NaN
      std::normal_distribution<float> dist(0.0f, kind == 1 ? 1.0f : 3.0f);
      std::vector<float> logits(n);
      for (int32_t i = 0; i < n; ++i) {
        float x = dist(rng);
        if (kind == 1) x = std::round(x * 2.0f) / 2.0f;
        if (kind == 2 && i % 3 == 1) x = -std::numeric_limits<float>::infinity();
        if (kind == 3 && i % 5 == 2) x = std::numeric_limits<float>::quiet_NaN();
        logits[i] = x;
      }
      for (int32_t top_k : {0, 1, 3, 40, 2000, 1 << 20}) {
        for (float top_p : {1.0f, 0.95f, 0.5f, 0.05f}) {
          for (float min_p : {0.0f, 0.05f, 0.3f, 1.0f}) {
            for (float temperature : {0.0f, 0.7f, 1.5f}) {
              SamplingParams p;
              p.top_k = top_k;
              p.top_p = top_p;
              p.min_p = min_p;
              p.temperature = temperature;
              hearth::compute_distribution(logits.data(), n, p, &got);
              const std::vector<Candidate> want = reference(logits, p);
              INFO("n=" << n << " kind=" << kind << " k=" << top_k << " p=" << top_p << " min_p=" << min_p
                        << " T=" << temperature);
              const std::vector<Candidate> g = by_id(got), w = by_id(want);
              REQUIRE(g.size() == w.size());
              double sum = 0.0;
              for (size_t i = 0; i < g.size(); ++i) {
                REQUIRE(g[i].id == w[i].id);
                REQUIRE(g[i].p == Approx(w[i].p).margin(1e-6));
                sum += g[i].p;
              }
              REQUIRE(sum == Approx(1.0).margin(1e-5));
              ++checked;
            }
          }
        }
      }
    }
  }
  CHECK(checked == 6 * 4 * 6 * 4 * 4 * 3);
}

TEST_CASE("with truncation on, candidates come best first", "[sampling]") {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.top_k = 4;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  std::vector<Candidate> got;
  hearth::compute_distribution(logits.data(), 5, p, &got);
  std::vector<int32_t> ids;
  for (const Candidate& c : got) ids.push_back(c.id);
  CHECK(ids == std::vector<int32_t>{1, 3, 4, 2});
}

TEST_CASE("a +inf or all -inf maximum falls back to the argmax", "[sampling]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Candidate> got;
  SamplingParams p;
  std::vector<float> pos = {0.0f, inf, 1.0f, inf};
  hearth::compute_distribution(pos.data(), 4, p, &got);
  REQUIRE(got.size() == 1);
  CHECK(got[0].id == 1);
  std::vector<float> neg = {-inf, -inf, -inf};
  p.top_k = 0;
  hearth::compute_distribution(neg.data(), 3, p, &got);
  REQUIRE(got.size() == 1);
  CHECK(got[0].id == 0);
}
