#include "engine/scheduler/token_loop.h"

#include <algorithm>

namespace hearth {

std::optional<PromptProblem> check_prompt(std::span<const int32_t> prompt, int64_t room, int32_t n_vocab) {
  using Kind = PromptProblem::Kind;
  if (prompt.empty()) return PromptProblem{Kind::Empty, "the prompt is empty"};
  if (static_cast<int64_t>(prompt.size()) >= room)
    return PromptProblem{Kind::TooLong, "the prompt is " + std::to_string(prompt.size()) +
                                            " tokens; the context holds " + std::to_string(room) +
                                            " (prompt and answer together)"};
  if (n_vocab > 0)
    for (int32_t t : prompt)
      if (t < 0 || t >= n_vocab)
        return PromptProblem{Kind::BadToken, "token id " + std::to_string(t) + " is outside the vocabulary"};
  return std::nullopt;
}

std::shared_ptr<GrammarCompiler> grammar_compiler_for(const Tokenizer& tokenizer) {
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    if (!tokenizer.is_control(id)) vocab[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  return std::make_shared<GrammarCompiler>(std::move(vocab), tokenizer.n_vocab(), tokenizer.eog_ids());
}

TokenLoop::TokenLoop(const SamplingParams& sampling, std::vector<std::string> stop, const Tokenizer& tokenizer,
                     std::span<const int32_t> prompt, int32_t max_tokens, int32_t room,
                     std::shared_ptr<const CompiledGrammar> grammar, int32_t top_logprobs, ReasoningLimit reasoning)
    : tokenizer_(tokenizer),
      sampler_(sampling),
      top_logprobs_(top_logprobs),
      stop_(std::move(stop), tokenizer.eog_ids()),
      reasoning_(std::move(reasoning)),
      max_tokens_(max_tokens < 0 ? room : std::min(max_tokens, room)) {
  if (grammar) grammar_.emplace(std::move(grammar));
  for (int32_t t : prompt) sampler_.accept(t);
}

TokenLogprob TokenLoop::logprob_of(const float* logits, int32_t n_vocab, int32_t id) {
  TokenLogprob lp;
  lp.token = id;
  lp.bytes = tokenizer_.token_bytes(id);
  lp.logprob = log_softmax_top(logits, n_vocab, id, top_logprobs_, &top_);
  for (const TokenScore& s : top_) lp.top.push_back({s.id, tokenizer_.token_bytes(s.id), s.logprob});
  return lp;
}

TokenLoop::Token TokenLoop::next(float* logits, int32_t n_vocab, Clock::time_point now) {
  Token out;
  sampler_.apply_penalties(logits, n_vocab);
  if (grammar_) grammar_->mask(logits, n_vocab);
  // Past the reasoning budget, the block's closing tokens are written instead of sampled.
  const std::optional<int32_t> forced = reasoning_.forced();
  out.id = forced ? *forced : sampler_.pick(logits, n_vocab);
  if (top_logprobs_ >= 0) out.logprob = logprob_of(logits, n_vocab, out.id);
  // The mask allowed the token, so the grammar takes it; should it not (a row with no token
  // allowed), the answer ends here rather than leave the grammar.
  const bool grammar_refused = grammar_ && !grammar_->accept(out.id);
  sampler_.accept(out.id);
  reasoning_.taken(tokenizer_.token_bytes(out.id));
  if (n_generated_ == 0)
    first_token_ = now;
  else
    itl_ms_.push_back(std::chrono::duration<double, std::milli>(now - last_token_).count());
  last_token_ = now;
  ++n_generated_;

  StopMatcher::Step step = stop_.feed_token(out.id, tokenizer_.token_bytes(out.id));
  out.text = std::move(step.text);
  if (step.stopped || grammar_refused || (grammar_ && grammar_->terminated()))
    out.finished = "stop";
  else if (n_generated_ >= max_tokens_)
    out.finished = "length";
  return out;
}

}  // namespace hearth
