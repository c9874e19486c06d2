// One sequence in-process (hearth-run, tests): prefill the prompt, then run the token loop
// (token_loop.h) that the daemon's scheduler runs for each of its sequences, so the same
// request gives the same tokens, text and finish reason in both.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/context.h"
#include "engine/sampling/params.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth {

struct GenerateOptions {
  int32_t max_tokens = 128;  // generated tokens at most; < 0: until the context is full
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings
};

struct GenerateTimings {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prefill_ms = 0;       // evaluating the prompt
  double ttft_ms = 0;          // start of generate() to the first token's text being ready
  double decode_ms = 0;        // first token to the last
  std::vector<double> itl_ms;  // gap between consecutive generated tokens
  double prefill_tok_s() const { return prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0; }
  double decode_tok_s() const;
  double itl_ms_mean() const;
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;  // generated ids (the end-of-generation token included)
  std::string finish_reason;    // "stop" (EOG token or stop string) or "length"
  GenerateTimings timings;
};

// Streams text pieces (valid UTF-8) through on_text as they become final; on_text
// returning false cancels generation.
using TextCallback = std::function<bool(std::string_view)>;

// Runs the prompt (appended to whatever ctx already holds) and generates.
Result<GenerateResult> generate(InferenceContext& ctx, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextCallback& on_text);

}  // namespace hearth
