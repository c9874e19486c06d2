#include "engine/sampling/sampler.h"

#include <cassert>

namespace hearth {
namespace {

uint64_t resolve_seed(uint64_t seed) {
  if (seed != kRandomSeed) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), seed_(resolve_seed(params.seed)), rng_(seed_) {}

void Sampler::reset() {
  window_.clear();
  counts_.clear();
}

void Sampler::accept(int32_t token) {
  if (!params_.penalties_enabled()) return;
  ++counts_[token];
  if (params_.penalty_last_n < 0) return;  // -1: all tokens count, no window to keep
  window_.push_back(token);
  if (static_cast<int32_t>(window_.size()) > params_.penalty_last_n) {
    const int32_t old = window_.front();
    window_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

// llama.cpp's llama_sampler_penalties_apply and OpenAI's rule:
//   logit = logit > 0 ? logit / repetition : logit * repetition      (if count > 0)
//   logit -= count * frequency + (count > 0) * presence
void Sampler::apply_penalties(float* logits, int32_t n_vocab) const {
  if (!params_.penalties_enabled()) return;
  for (const auto& [token, count] : counts_) {
    if (token < 0 || token >= n_vocab) continue;
    float& l = logits[token];
    l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    l -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

double Sampler::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(float* logits, int32_t n_vocab) {
  apply_penalties(logits, n_vocab);
  return pick(logits, n_vocab);
}

int32_t Sampler::pick(const float* logits, int32_t n_vocab) {
  assert(n_vocab >= 1);
  if (params_.temperature <= 0.0f) return argmax(logits, n_vocab);
  compute_distribution(logits, n_vocab, params_, &candidates_);
  // Exactly one draw per non-greedy sample, so the stream position is the sample count.
  const double u = next_uniform();
  double cum = 0.0;
  for (const Candidate& c : candidates_) {
    cum += c.p;
    if (u < cum) return c.id;
  }
  return candidates_.back().id;  // u above the rounded total
}

}  // namespace hearth
