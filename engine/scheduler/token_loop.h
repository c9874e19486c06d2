// The generation loop of one sequence, once its prompt is read: each row of logits becomes
// a token (sampled, then seen by the penalties), its text (through the stop matcher), its
// timing (first token, gaps) and, eventually, the end ("stop" or "length"). The daemon's
// scheduler (Sequence) and the in-process generate() of hearth-run both run it, so the same
// logits give the same tokens, text and finish reason in both.
//
// Also here: the checks a prompt must pass before either one runs it.
//
// Thread-safety: one thread at a time (the engine thread, or generate()'s caller).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/sampling/grammar.h"
#include "engine/sampling/params.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"
#include "engine/scheduler/reasoning_budget.h"
#include "engine/scheduler/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth {

// Why a prompt cannot be run; message is what a user reads.
struct PromptProblem {
  enum class Kind { Empty, TooLong, BadToken } kind;
  std::string message;
};

// A prompt of `prompt` tokens needs room for itself and one generated token in `room`
// context slots, and token ids inside the vocabulary (n_vocab; 0: ids are not checked,
// as for the output of the model's own tokenizer).
std::optional<PromptProblem> check_prompt(std::span<const int32_t> prompt, int64_t room, int32_t n_vocab = 0);

// The grammar compiler over a tokenizer's vocabulary: each token's bytes; control tokens
// (turn markers, end of generation) are "": a grammar never writes them, but for the
// end-of-generation tokens where it may end.
std::shared_ptr<GrammarCompiler> grammar_compiler_for(const Tokenizer& tokenizer);

class TokenLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // prompt: the tokens the penalties see before the first generated one (as llama.cpp's
  // server does). max_tokens: generated tokens at most, < 0 for no limit but the room;
  // room: context slots left after the prompt (the generated tokens fill them). grammar:
  // the tokens must follow it (null: free). top_logprobs >= 0: each token reports its
  // log-probability and that many alternatives. reasoning: a bound on the reasoning block,
  // whose closing tokens are then forced instead of sampled (reasoning_budget.h).
  TokenLoop(const SamplingParams& sampling, std::vector<std::string> stop, const Tokenizer& tokenizer,
            std::span<const int32_t> prompt, int32_t max_tokens, int32_t room,
            std::shared_ptr<const CompiledGrammar> grammar = nullptr, int32_t top_logprobs = -1,
            ReasoningLimit reasoning = {});

  struct Token {
    int32_t id = 0;
    std::string text;                     // valid UTF-8 that is final now, may be empty
    const char* finished = nullptr;       // "stop" (end-of-generation token or stop string), "length", or nullptr
    std::optional<TokenLogprob> logprob;  // when top_logprobs >= 0
  };
  // The next token from the logits of the last token run (modified in place: penalties,
  // then the grammar's mask). Its log-probability is read from those logits at
  // temperature 1, before truncation: the distribution the sampler draws from, reshaped only
  // by the request's temperature and cut by its top-k / top-p / min-p.
  Token next(float* logits, int32_t n_vocab, Clock::time_point now);

  // The text the stop matcher still holds, at the end of generation.
  std::string flush() { return stop_.flush(); }
  // The stop string that ended generation ("stop"); "" when an end-of-generation token did.
  const std::string& stop_sequence() const { return stop_.matched(); }

  int32_t n_generated() const { return n_generated_; }
  const ReasoningBudget& reasoning() const { return reasoning_; }
  // The generated tokens at most: max_tokens capped by the room.
  int32_t max_tokens() const { return max_tokens_; }
  Clock::time_point first_token() const { return first_token_; }
  Clock::time_point last_token() const { return last_token_; }
  // Gaps between consecutive generated tokens (ms).
  const std::vector<double>& itl_ms() const { return itl_ms_; }

 private:
  TokenLogprob logprob_of(const float* logits, int32_t n_vocab, int32_t id);

  const Tokenizer& tokenizer_;
  Sampler sampler_;
  std::optional<GrammarMatcher> grammar_;
  int32_t top_logprobs_ = -1;
  std::vector<TokenScore> top_;  // scratch
  StopMatcher stop_;
  ReasoningBudget reasoning_;
  int32_t max_tokens_ = 0;
  int32_t n_generated_ = 0;
  Clock::time_point first_token_, last_token_;
  std::vector<double> itl_ms_;
};

}  // namespace hearth
