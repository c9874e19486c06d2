// Sampler: greedy, seeds, truncation by frequency of draws, penalties by exact logit values,
// parameter validation. Timing of sample() at Gemma 3's vocabulary is printed, not asserted.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"

using hearth::Sampler;
using hearth::SamplingParams;

namespace {

// No truncation, temperature 1: draws follow softmax(logits).
SamplingParams plain_params(uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Frequency of each token over n draws from the same logits.
std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    ++count[s.sample(l.data(), static_cast<int32_t>(l.size()))];
  }
  std::vector<double> freq;
  for (int c : count) freq.push_back(static_cast<double>(c) / n);
  return freq;
}

// Five standard deviations of a frequency over n draws: a false failure is ~1 in 1.7 million.
double five_sigma(double p, int n) {
  return 5.0 * std::sqrt(p * (1.0 - p) / n) + 1e-9;
}

std::vector<float> random_logits(int32_t n, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = dist(rng);
  return l;
}

}  // namespace

TEST_CASE("greedy picks the argmax, ties go to the lowest id", "[sampling]") {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  CHECK(s.sample(logits.data(), 5) == 1);
  p.temperature = -1.0f;  // negative is greedy too
  Sampler s2(p);
  std::vector<float> nan_first = {std::numeric_limits<float>::quiet_NaN(), -3.0f, -2.0f};
  CHECK(s2.sample(nan_first.data(), 3) == 2);
}

TEST_CASE("the same seed gives the same samples, another seed different ones", "[sampling]") {
  std::vector<float> flat(1000, 0.0f);
  auto run = [&](uint64_t seed) {
    Sampler s(plain_params(seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l = flat;
      out.push_back(s.sample(l.data(), 1000));
    }
    return out;
  };
  CHECK(run(42) == run(42));
  CHECK(run(42) != run(43));
}

TEST_CASE("a random seed is reported and reproduces the samples", "[sampling]") {
  SamplingParams p = plain_params(hearth::kRandomSeed);
  Sampler a(p);
  p.seed = a.seed();
  Sampler b(p);
  std::vector<float> flat(100, 0.0f);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> la = flat, lb = flat;
    REQUIRE(a.sample(la.data(), 100) == b.sample(lb.data(), 100));
  }
}

TEST_CASE("temperature near 0 approaches greedy", "[sampling]") {
  const std::vector<float> logits = {1.0f, 0.9f, 0.5f, 0.95f};
  SamplingParams p = plain_params();
  p.temperature = 0.005f;  // p(1) / p(0) = exp(-0.1 / 0.005) = 2e-9
  Sampler s(p);
  const std::vector<double> freq = frequencies(s, logits, 2000);
  CHECK(freq[0] == 1.0);
  p.temperature = 1e-30f;  // 1 / temperature overflows: greedy
  Sampler tiny(p);
  CHECK(frequencies(tiny, logits, 100)[0] == 1.0);
}

TEST_CASE("temperature 2 flattens the distribution as softmax(logits / 2)", "[sampling]") {
  const std::vector<float> logits = log_probs({0.64, 0.36});  // at T=2: sqrt -> 0.8 : 0.6
  SamplingParams p = plain_params(7);
  p.temperature = 2.0f;
  Sampler s(p);
  const int n = 20000;
  const std::vector<double> freq = frequencies(s, logits, n);
  CHECK(std::abs(freq[0] - 0.8 / 1.4) < five_sigma(0.8 / 1.4, n));
}

TEST_CASE("top-k 1 always picks the argmax", "[sampling]") {
  SamplingParams p = plain_params(3);
  p.top_k = 1;
  p.temperature = 5.0f;
  Sampler s(p);
  for (uint64_t trial = 0; trial < 100; ++trial) {
    std::vector<float> l = random_logits(5000, trial);
    const int32_t best = hearth::argmax(l.data(), 5000);
    REQUIRE(s.sample(l.data(), 5000) == best);
  }
}

TEST_CASE("top-k keeps the k best and renormalizes", "[sampling]") {
  const std::vector<float> logits = log_probs({0.1, 0.4, 0.2, 0.3});
  SamplingParams p = plain_params(11);
  p.top_k = 2;
  Sampler s(p);
  const int n = 20000;
  const std::vector<double> freq = frequencies(s, logits, n);
  CHECK(freq[0] == 0.0);
  CHECK(freq[2] == 0.0);
  CHECK(std::abs(freq[1] - 4.0 / 7.0) < five_sigma(4.0 / 7.0, n));
}

TEST_CASE("top-p keeps the smallest set whose probability reaches p", "[sampling]") {
  // Best first: 0.5, 0.3 (cum 0.8 >= 0.75), then 0.15, 0.05 are cut.
  const std::vector<float> logits = log_probs({0.15, 0.5, 0.05, 0.3});
  SamplingParams p = plain_params(5);
  p.top_p = 0.75f;
  Sampler s(p);
  const int n = 20000;
  const std::vector<double> freq = frequencies(s, logits, n);
  CHECK(freq[0] == 0.0);
  CHECK(freq[2] == 0.0);
  CHECK(std::abs(freq[1] - 0.625) < five_sigma(0.625, n));
  CHECK(std::abs(freq[3] - 0.375) < five_sigma(0.375, n));

  SamplingParams q = plain_params(5);
  q.top_p = 0.45f;  // the best token alone reaches 0.45
  Sampler one(q);
  CHECK(frequencies(one, logits, 1000)[1] == 1.0);
}

TEST_CASE("top-p over a large flat tail keeps only the mass it needs", "[sampling]") {
  // Token 0 has half the mass, 100,000 tokens share the rest: top_p 0.4 needs token 0 alone,
  // top_p 0.500102 token 0 and 21 tail tokens.
  const int32_t n_vocab = 100001;
  std::vector<float> logits(n_vocab, 0.0f);
  logits[0] = std::log(100000.0f);
  SamplingParams p = plain_params(9);
  p.top_p = 0.4f;
  Sampler s(p);
  CHECK(frequencies(s, logits, 200)[0] == 1.0);
  p.top_p = 0.500102f;
  Sampler s2(p);
  (void)frequencies(s2, logits, 1);
  // 0.5 + m * 0.5e-5 >= 0.500102 -> m = 21 tail tokens (ids 1..21: ties go by id)
  REQUIRE(s2.last_distribution().size() == 22);
  CHECK(s2.last_distribution().back().id == 21);
}

TEST_CASE("min-p removes tokens below min_p times the top probability", "[sampling]") {
  // min_p 0.2 of 0.5 = 0.1: token with 0.05 goes, 0.15 stays.
  const std::vector<float> logits = log_probs({0.5, 0.05, 0.3, 0.15});
  SamplingParams p = plain_params(13);
  p.min_p = 0.2f;
  Sampler s(p);
  const int n = 20000;
  const std::vector<double> freq = frequencies(s, logits, n);
  CHECK(freq[1] == 0.0);
  CHECK(std::abs(freq[0] - 0.5 / 0.95) < five_sigma(0.5 / 0.95, n));
  CHECK(std::abs(freq[3] - 0.15 / 0.95) < five_sigma(0.15 / 0.95, n));
}

TEST_CASE("penalties change exactly the logits of tokens seen, by the CTRL and OpenAI rules", "[sampling]") {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  for (int32_t t : {0, 0, 1}) s.accept(t);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  s.sample(logits.data(), 4);
  CHECK(logits[0] == 0.0f);    // 2 / 2 - (2 * 0.25 + 0.5)
  CHECK(logits[1] == -2.75f);  // -1 * 2 - (1 * 0.25 + 0.5)
  CHECK(logits[2] == 0.5f);
  CHECK(logits[3] == 3.0f);
}

TEST_CASE("penalties can flip the greedy choice", "[sampling]") {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  s.accept(0);
  std::vector<float> logits = {3.0f, 2.5f};
  CHECK(s.sample(logits.data(), 2) == 1);  // 3 / 1.5 = 2 < 2.5
}

TEST_CASE("penalties look only at the last penalty_last_n tokens", "[sampling]") {
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 2;
  Sampler s(p);
  for (int32_t t : {0, 1, 2}) s.accept(t);
  std::vector<float> logits(4, 0.0f);
  s.sample(logits.data(), 4);
  CHECK(logits == std::vector<float>{0.0f, -1.0f, -1.0f, 0.0f});

  p.penalty_last_n = -1;  // all tokens
  Sampler all(p);
  for (int32_t t : {0, 1, 2}) all.accept(t);
  std::vector<float> l2(4, 0.0f);
  all.sample(l2.data(), 4);
  CHECK(l2 == std::vector<float>{-1.0f, -1.0f, -1.0f, 0.0f});

  p.penalty_last_n = 0;  // none
  Sampler none(p);
  none.accept(0);
  std::vector<float> l3(4, 0.0f);
  none.sample(l3.data(), 4);
  CHECK(l3 == std::vector<float>(4, 0.0f));
}

TEST_CASE("reset forgets the penalty history and tokens outside the vocabulary are ignored", "[sampling]") {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  Sampler s(p);
  s.accept(1);
  s.accept(99);
  s.accept(-5);
  std::vector<float> l(3, 0.0f);
  s.sample(l.data(), 3);
  CHECK(l == std::vector<float>{0.0f, -1.0f, 0.0f});
  s.reset();
  std::vector<float> l2(3, 0.0f);
  s.sample(l2.data(), 3);
  CHECK(l2 == std::vector<float>(3, 0.0f));
}

TEST_CASE("validate accepts the defaults and names the field that is out of range", "[sampling]") {
  CHECK(SamplingParams{}.validate().ok());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* field;
    void (*set)(SamplingParams&, float);
    float bad;
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p, float v) { p.temperature = v; }, -0.1f},
      {"temperature", [](SamplingParams& p, float v) { p.temperature = v; }, 101.0f},
      {"temperature", [](SamplingParams& p, float v) { p.temperature = v; }, nan},
      {"top_p", [](SamplingParams& p, float v) { p.top_p = v; }, 0.0f},
      {"top_p", [](SamplingParams& p, float v) { p.top_p = v; }, 1.5f},
      {"min_p", [](SamplingParams& p, float v) { p.min_p = v; }, -0.01f},
      {"min_p", [](SamplingParams& p, float v) { p.min_p = v; }, nan},
      {"repetition_penalty", [](SamplingParams& p, float v) { p.repetition_penalty = v; }, 0.0f},
      {"repetition_penalty", [](SamplingParams& p, float v) { p.repetition_penalty = v; }, 11.0f},
      {"presence_penalty", [](SamplingParams& p, float v) { p.presence_penalty = v; }, 2.5f},
      {"frequency_penalty", [](SamplingParams& p, float v) { p.frequency_penalty = v; }, -2.5f},
      {"penalty_last_n", [](SamplingParams& p, float v) { p.penalty_last_n = static_cast<int32_t>(v); }, -2.0f},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p, c.bad);
    const hearth::Status st = p.validate();
    INFO(c.field << " = " << c.bad);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find(c.field) != std::string::npos);
  }
  SamplingParams edge;
  edge.temperature = 0.0f;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.top_k = -1;
  edge.presence_penalty = -2.0f;
  edge.frequency_penalty = 2.0f;
  edge.penalty_last_n = -1;
  CHECK(edge.validate().ok());
}

TEST_CASE("timing: sample() over 262,144 logits (printed, not asserted)", "[sampling][timing]") {
  const int32_t n_vocab = 262144;
  const std::vector<float> base = random_logits(n_vocab, 2024, 2.0f);
  struct Config {
    const char* name;
    SamplingParams params;
  };
  std::vector<Config> configs;
  configs.push_back({"defaults (k=40 p=0.95 min_p=0.05 T=0.8)", SamplingParams{}});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  configs.push_back({"greedy", greedy});
  SamplingParams top_p_only;
  top_p_only.top_k = 0;
  top_p_only.min_p = 0.0f;
  configs.push_back({"top_k=0 min_p=0 top_p=0.95", top_p_only});
  SamplingParams min_p_only = top_p_only;
  min_p_only.top_p = 1.0f;
  min_p_only.min_p = 0.05f;
  configs.push_back({"top_k=0 top_p=1 min_p=0.05", min_p_only});
  configs.push_back({"no truncation", plain_params()});
  SamplingParams penalties;
  penalties.repetition_penalty = 1.1f;
  penalties.frequency_penalty = 0.1f;
  configs.push_back({"defaults + penalties over 64 tokens", penalties});
  for (Config& c : configs) {
    c.params.seed = 1;
    Sampler s(c.params);
    for (int32_t t = 0; t < 64; ++t) s.accept(t * 97);
    std::vector<float> l = base;
    const int reps = 50;
    double total_ms = 0.0;
    for (int i = 0; i < reps; ++i) {
      std::copy(base.begin(), base.end(), l.begin());
      const auto t0 = std::chrono::steady_clock::now();
      (void)s.sample(l.data(), n_vocab);
      total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    std::printf("sample() n_vocab=%d %-40s %.3f ms\n", n_vocab, c.name, total_ms / reps);
  }
  SUCCEED();
}

TEST_CASE("params outside validate()'s ranges still give a token, never a crash", "[sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> base = {0.1f, 2.0f, 1.0f, -0.5f};
  std::vector<SamplingParams> cases(6, plain_params(3));
  cases[0].min_p = 5.0f;       // above 1: only the best token
  cases[1].top_p = 0.0f;       // best token only
  cases[2].top_p = nan;        // disabled
  cases[3].temperature = nan;  // greedy
  cases[4].top_k = 2;
  cases[4].min_p = 5.0f;
  cases[5].repetition_penalty = nan;  // the penalized token's logit becomes NaN and is skipped
  for (size_t i = 0; i < cases.size(); ++i) {
    Sampler s(cases[i]);
    s.accept(1);
    std::vector<float> l = base;
    const int32_t t = s.sample(l.data(), 4);
    INFO("case " << i);
    CHECK((t >= 0 && t < 4));
    if (i <= 1 || i == 3 || i == 4) CHECK(t == 1);
  }
  Sampler one(plain_params());
  float single = 0.0f;
  CHECK(one.sample(&single, 1) == 0);
}
