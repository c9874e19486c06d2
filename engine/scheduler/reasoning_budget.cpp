#include "engine/scheduler/reasoning_budget.h"

#include <utility>

namespace hearth {

ReasoningBudget::ReasoningBudget(ReasoningLimit limit)
    : limit_(std::move(limit)),
      splitter_(limit_.inside, limit_.open, limit_.close),
      state_(limit_.bounded() ? State::Watching : State::Done) {
  check_budget();
}

std::optional<int32_t> ReasoningBudget::forced() const {
  if (state_ != State::Closing) return std::nullopt;
  return limit_.close_tokens[n_forced_];
}

void ReasoningBudget::taken(std::string_view bytes) {
  switch (state_) {
    case State::Watching: {
      // A token taken inside the block is reasoning, the one that closes it included; the
      // one that opens it is not.
      const bool was_inside = splitter_.in_reasoning();
      splitter_.feed(bytes);  // only its state matters here, not the pieces
      if (was_inside) ++n_reasoning_;
      check_budget();
      return;
    }
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

// Watching: inside the block with the budget spent, close it; past the block (the model
// closed it, or the answer never opened one), nothing more to watch.
void ReasoningBudget::check_budget() {
  if (state_ != State::Watching) return;
  if (splitter_.in_reasoning()) {
    if (n_reasoning_ >= limit_.max_tokens) state_ = State::Closing;
  } else if (splitter_.past_start()) {
    state_ = State::Done;
  }
}

}  // namespace hearth
