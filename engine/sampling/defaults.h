// A model's own sampling defaults (issue 42): what its publisher recommends, read from the
// GGUF's general.sampling.* keys (llama.cpp's converter writes them from the model's
// generation_config.json) or, for a file that has none, from hearth's catalog. A request's
// fields override them one by one; a field neither the request nor the model sets keeps the
// API's own default (OpenAI's, Ollama's, Anthropic's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/sampling/params.h"

namespace hearth {

// The fields a model may recommend; nullopt: it does not say.
struct SamplingDefaults {
  std::optional<float> temperature = {};         // general.sampling.temp
  std::optional<int32_t> top_k = {};             // general.sampling.top_k
  std::optional<float> top_p = {};               // general.sampling.top_p
  std::optional<float> min_p = {};               // general.sampling.min_p
  std::optional<float> repetition_penalty = {};  // general.sampling.penalty_repeat
  std::optional<int32_t> penalty_last_n = {};    // general.sampling.penalty_last_n (tokens)

  bool empty() const { return !temperature && !top_k && !top_p && !min_p && !repetition_penalty && !penalty_last_n; }
  // Each field this leaves unset is taken from fallback.
  SamplingDefaults or_else(const SamplingDefaults& fallback) const;
  bool operator==(const SamplingDefaults&) const = default;
};

// A loaded or listed model's defaults and where they came from.
struct ModelSampling {
  SamplingDefaults defaults;
  // With thinking turned off, where the publisher recommends other values (Qwen3);
  // nullopt: the same as defaults.
  std::optional<SamplingDefaults> no_thinking;
  std::string source;  // "gguf", "catalog", "gguf+catalog" (the file's, the rest from the catalog), "" (none)
};

// Which sampling fields a request set itself (bits, OR-ed).
enum SamplingField : uint32_t {
  kSetTemperature = 1u << 0,
  kSetTopK = 1u << 1,
  kSetTopP = 1u << 2,
  kSetMinP = 1u << 3,
  kSetRepetitionPenalty = 1u << 4,
  kSetPenaltyLastN = 1u << 5,
};

// The request's parameters with each field it did not set (not in given) taken from the
// model's defaults where they have it. A request that asks for greedy decoding (temperature
// 0 of its own) gets none of them: greedy stays the argmax of the model's logits, without
// the model's repetition penalty, so it is what it always was (and what llama.cpp's greedy
// reference tokens are); a penalty the request sets itself still applies.
SamplingParams with_model_defaults(SamplingParams request, uint32_t given, const SamplingDefaults& model);

// "temperature 0.7, top_k 20, top_p 0.8, repetition_penalty 1.05 (catalog)"; "none" when
// empty. With no-thinking values, those follow: "; without thinking: ...".
std::string describe_defaults(const ModelSampling& m);

// Checks the defaults as SamplingParams::validate() checks a request; the message names the
// field. A file's defaults out of range are dropped with that message, never applied.
Status validate_defaults(const SamplingDefaults& d);

}  // namespace hearth
