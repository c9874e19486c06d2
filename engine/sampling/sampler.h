// Sampler: one sequence's token picker. Penalties from the recent tokens, then
// compute_distribution (top-k -> top-p -> min-p -> temperature, see distribution.h), then a
// draw from a PRNG we own, so the same seed gives the same tokens on every platform.
//
// Not thread-safe: one Sampler per sequence, used by one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <unordered_map>
#include <vector>

#include "engine/sampling/distribution.h"
#include "engine/sampling/params.h"

namespace hearth {

class Sampler {
 public:
  // Any params work (validate() is for rejecting requests): temperature <= 0 or NaN is
  // greedy, NaN top_p / min_p disable them, the best token always survives truncation.
  explicit Sampler(const SamplingParams& params);

  // Forgets the penalty history (a new sequence). The random stream goes on; it is not
  // restarted, so a second sequence does not repeat the first one's draws.
  void reset();

  // Adds a token to the penalty history: each generated token, and prompt tokens if they
  // should be penalized too.
  void accept(int32_t token);

  // Picks the next token. logits: [n_vocab], modified in place (penalties applied).
  // Greedy (temperature <= 0) is a plain argmax and does not use the random stream.
  // sample() = apply_penalties() then pick(): a caller that masks the logits (a grammar) or
  // reads their distribution (logprobs) does so between the two.
  int32_t sample(float* logits, int32_t n_vocab);
  void apply_penalties(float* logits, int32_t n_vocab) const;
  int32_t pick(const float* logits, int32_t n_vocab);

  // The seed actually used (the one drawn from std::random_device for kRandomSeed).
  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

  // The distribution the last non-greedy sample() drew from (for logprobs, debugging).
  const std::vector<Candidate>& last_distribution() const { return candidates_; }

 private:
  // Uniform in [0, 1) from the top 53 bits of one mt19937_64 output: mt19937_64's sequence is
  // fixed by the standard, unlike std::uniform_real_distribution's conversion.
  double next_uniform();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<int32_t> window_;                   // last penalty_last_n tokens, oldest first
  std::unordered_map<int32_t, int32_t> counts_;  // token -> occurrences in the window
  std::vector<Candidate> candidates_;            // scratch, reused across calls
};

}  // namespace hearth
