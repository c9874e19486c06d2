// A bound on a thinking model's reasoning (Anthropic's thinking.budget_tokens): once the
// answer has spent max_tokens tokens inside its reasoning block ("<think>…") without closing
// it, the next tokens are not sampled but forced — the template's end of the block
// ("\n</think>\n\n" for Qwen3), tokenized — and the answer goes on after it as content. The
// forced tokens are ordinary generated tokens: they run through the model, the penalties see
// them, they count in max_tokens and usage, and their text is the model's answer.
//
// The block is the one the splitter (engine/tokenizer/reasoning.h) finds in the answer's text:
// at the start, after optional whitespace, unless the prompt opened it already (`inside`).
// The tokens that write the opening tag are not reasoning; every token after it, until the
// close, is. A model that closes the block itself ends the count.
//
// Not thread-safe; one per sequence (its TokenLoop's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/reasoning.h"

namespace hearth {

struct ReasoningLimit {
  int32_t max_tokens = -1;            // reasoning tokens at most; < 0: no bound
  std::vector<int32_t> close_tokens;  // what closes the block, tokenized (special tokens as such)
  std::string open = "<think>", close = "</think>";
  bool inside = false;  // the prompt opened the block: the answer starts as reasoning
  bool bounded() const { return max_tokens >= 0 && !close_tokens.empty(); }
};

class ReasoningBudget {
 public:
  explicit ReasoningBudget(ReasoningLimit limit);

  // The token to write now instead of sampling one; nullopt: sample.
  std::optional<int32_t> forced() const;
  // The token just written (sampled or forced), as its text's bytes.
  void taken(std::string_view bytes);

  int32_t n_reasoning() const { return n_reasoning_; }  // tokens written inside the block
  bool closed_by_budget() const { return closed_by_budget_; }

 private:
  enum class State { Watching, Closing, Done };  // Watching: following the splitter
  void check_budget();

  ReasoningLimit limit_;
  ReasoningSplitter splitter_;  // where the answer's text is: before, in or after the block
  State state_;
  int32_t n_reasoning_ = 0;
  size_t n_forced_ = 0;  // Closing: close tokens written
  bool closed_by_budget_ = false;
};

}  // namespace hearth
