#include "engine/scheduler/reasoning_budget.h"

#include <utility>

namespace hearth {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

}  // namespace

ReasoningBudget::ReasoningBudget(ReasoningLimit limit)
    : limit_(std::move(limit)), state_(limit_.bounded() ? State::Start : State::Done) {
  if (state_ == State::Start && limit_.inside) enter_inside("");
}

std::optional<int32_t> ReasoningBudget::forced() const {
  if (state_ != State::Closing) return std::nullopt;
  return limit_.close_tokens[n_forced_];
}

void ReasoningBudget::taken(std::string_view bytes) {
  switch (state_) {
    case State::Start: {
      buf_.append(bytes);
      size_t i = 0;
      while (i < buf_.size() && is_space(buf_[i])) ++i;
      const std::string_view s = std::string_view(buf_).substr(i);
      const std::string_view open = limit_.open;
      if (s.size() < open.size()) {
        if (open.substr(0, s.size()) != s) state_ = State::Done;  // the answer does not open a block
        return;
      }
      if (s.substr(0, open.size()) != open) {
        state_ = State::Done;
        return;
      }
      const std::string after(s.substr(open.size()));
      buf_.clear();
      enter_inside(after);
      return;
    }
    case State::Inside:
      ++n_reasoning_;
      scan_inside(bytes);
      if (state_ == State::Inside && n_reasoning_ >= limit_.max_tokens) state_ = State::Closing;
      return;
    case State::Closing:
      if (++n_forced_ == limit_.close_tokens.size()) {
        closed_by_budget_ = true;
        state_ = State::Done;
      }
      return;
    case State::Done:
      return;
  }
}

void ReasoningBudget::enter_inside(std::string_view after_open) {
  state_ = State::Inside;
  scan_inside(after_open);
  if (state_ == State::Inside && limit_.max_tokens == 0) state_ = State::Closing;
}

// Looks for the close tag in what came, across token boundaries.
void ReasoningBudget::scan_inside(std::string_view bytes) {
  buf_.append(bytes);
  if (buf_.find(limit_.close) != std::string::npos) {
    state_ = State::Done;  // the model closed it
    return;
  }
  const size_t keep = limit_.close.size() - 1;
  if (buf_.size() > keep) buf_.erase(0, buf_.size() - keep);
}

}  // namespace hearth
