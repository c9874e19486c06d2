// SamplingParams: how one sequence turns logits into tokens. Defaults are llama.cpp's
// (common_params_sampling), so results can be compared with llama-cli.
#pragma once

#include <cstdint>

#include "common/result.h"

namespace hearth {

// Seed value meaning "pick one from std::random_device"; Sampler::seed() reports the pick.
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFF'FFFFFFFFull;

struct SamplingParams {
  float temperature = 0.8f;         // <= 0: greedy (argmax, ties -> lowest id)
  int32_t top_k = 40;               // <= 0 or >= n_vocab: disabled
  float top_p = 0.95f;              // >= 1: disabled
  float min_p = 0.05f;              // <= 0: disabled
  float repetition_penalty = 1.0f;  // 1: disabled. CTRL rule: logit > 0 -> logit / p, else logit * p
  float presence_penalty = 0.0f;    // OpenAI rule: logit -= presence if the token occurred
  float frequency_penalty = 0.0f;   // OpenAI rule: logit -= frequency * occurrences
  int32_t penalty_last_n = 64;      // tokens (most recent) the penalties look at; 0: none, -1: all
  uint64_t seed = kRandomSeed;

  bool penalties_enabled() const {
    return penalty_last_n != 0 && (repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }

  // Checks every field is in range (NaN is never in range); the message names the field.
  // temperature [0, 100], top_p (0, 1], min_p [0, 1], repetition_penalty (0, 10],
  // presence/frequency_penalty [-2, 2] (OpenAI's range), penalty_last_n >= -1. top_k: any.
  Status validate() const;
};

}  // namespace hearth
