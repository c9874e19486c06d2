// From logits to the distribution a token is drawn from: truncation (top-k, top-p, min-p) and
// temperature. Pure functions of their inputs; Sampler adds penalties, history and the PRNG.
//
// Order, as llama.cpp's default chain (common/common.h, common_params_sampling::samplers:
// penalties -> dry -> top_n_sigma -> top_k -> typical_p -> top_p -> min_p -> xtc ->
// temperature -> dist), without the samplers we do not have:
//   top-k -> top-p -> min-p -> temperature -> draw
// Truncation sees the temperature-1 distribution (top-p renormalized over the top-k
// survivors); temperature only reshapes the survivors. So a high temperature flattens the
// plausible tokens but can never bring back the long tail of junk, and a given top_p / min_p
// cuts the same tokens whatever the temperature.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampling/params.h"

namespace hearth {

struct Candidate {
  int32_t id = 0;
  float logit = 0.0f;  // as given (after penalties), before temperature
  float p = 0.0f;      // final probability; the candidates' p sum to 1
};

// Lowest id among the largest logits; NaN logits are ignored. n_vocab >= 1.
int32_t argmax(const float* logits, int32_t n_vocab);

struct TokenScore {
  int32_t id = 0;
  float logprob = 0.0f;
};

// log softmax(logits)[token] at temperature 1, and the n most likely tokens with theirs into
// *top (best first; ties -> lower id). A logit that is not finite (a grammar's -inf, NaN) has
// probability 0: logprob -inf, never among the top. logits: [n_vocab], n_vocab >= 1;
// 0 <= n. Summed in double, in id order: the same logits give the same bits.
float log_softmax_top(const float* logits, int32_t n_vocab, int32_t token, int32_t n, std::vector<TokenScore>* top);

// Fills *out with the tokens that survive truncation and their probabilities after
// temperature. With top-k on they are sorted best first (logit descending, ties -> lower id);
// without it their order is unspecified but deterministic (Sampler draws in that order).
// NaN logits never survive. Greedy (temperature <= 0) or a non-finite maximum logit
// (+inf, or all -inf/NaN) gives the single argmax with p = 1.
// Cost: a few O(n_vocab) passes plus a sort of at most the survivors: never a sort of the
// whole vocabulary, except top-k > 1024 (nth_element, then a sort of the k) or top-p over
// logits so flat that the top-p cut falls in a 1/64-nat band holding most of them.
// logits: [n_vocab], n_vocab >= 1. *out is overwritten; its capacity is reused.
void compute_distribution(const float* logits, int32_t n_vocab, const SamplingParams& params,
                          std::vector<Candidate>* out);

}  // namespace hearth
