// A bound on the reasoning block (engine/scheduler/reasoning_budget.h): the state machine over
// any cut of the text, and the scheduler forcing the close on a synthetic model.
#include "engine/scheduler/reasoning_budget.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/engine/scheduler_fixture.h"

using namespace hearth;

namespace {

ReasoningLimit limit(int32_t max_tokens, bool inside = false) {
  ReasoningLimit l;
  l.max_tokens = max_tokens;
  l.close_tokens = {901, 902, 903};  // stand-ins for "\n</think>\n\n"
  l.inside = inside;
  return l;
}

// Feeds pieces as sampled tokens, the forced ones as they come; returns what was forced.
std::vector<int32_t> run(ReasoningBudget& b, const std::vector<std::string>& pieces) {
  std::vector<int32_t> forced;
  for (const std::string& p : pieces) {
    while (std::optional<int32_t> f = b.forced()) {
      forced.push_back(*f);
      b.taken("<forced>");
    }
    b.taken(p);
  }
  while (std::optional<int32_t> f = b.forced()) {
    forced.push_back(*f);
    b.taken("<forced>");
  }
  return forced;
}

}  // namespace

TEST_CASE("past its budget the reasoning block is closed with the template's tokens, once", "[reasoning]") {
  ReasoningBudget b(limit(3));
  // The opening tag, split across tokens and after whitespace, is not reasoning.
  CHECK(run(b, {"\n", "<th", "ink>", "\n", "a", "b"}) == std::vector<int32_t>{901, 902, 903});
  CHECK(b.n_reasoning() == 3);
  CHECK(b.closed_by_budget());
  CHECK(run(b, {"the", " answer"}).empty());  // content from then on
}

TEST_CASE("a block the model closes within its budget is left alone", "[reasoning]") {
  ReasoningBudget b(limit(5));
  CHECK(run(b, {"<think>", "\nhm", "\n</th", "ink>", "\n\nok", "more", "and", "more"}).empty());
  CHECK_FALSE(b.closed_by_budget());
  CHECK(b.n_reasoning() == 3);
}

TEST_CASE("an answer without a block, or without a budget, is never forced", "[reasoning]") {
  ReasoningBudget plain(limit(1));
  CHECK(run(plain, {"Hello", " <think>", "x", "y", "z"}).empty());
  ReasoningBudget unbounded(limit(-1));
  CHECK(run(unbounded, {"<think>", "a", "b", "c", "d"}).empty());
  ReasoningLimit no_close = limit(1);
  no_close.close_tokens.clear();
  ReasoningBudget nothing_to_write(no_close);
  CHECK(run(nothing_to_write, {"<think>", "a", "b"}).empty());
}

TEST_CASE("a block the prompt opened counts from the first token, budget 0 closes at once", "[reasoning]") {
  ReasoningBudget inside(limit(2, true));
  CHECK(run(inside, {"a", "b"}) == std::vector<int32_t>{901, 902, 903});
  ReasoningBudget zero(limit(0, true));
  CHECK(zero.forced() == 901);
  ReasoningBudget zero_open(limit(0));
  CHECK(run(zero_open, {"<think>"}) == std::vector<int32_t>{901, 902, 903});
  CHECK(zero_open.n_reasoning() == 0);
}

TEST_CASE("the scheduler writes the close after the budget's tokens and the answer goes on", "[reasoning]") {
  test::Fixture f("qwen3");
  SchedulerOptions so;
  so.n_ctx = 256;
  so.block_tokens = 16;
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  const std::string close = "\n</think>\n\n";
  auto run_one = [&](const GenerationRequest& r) {
    std::vector<std::unique_ptr<test::Collector>> cs = test::submit_all(*sched, {r});
    REQUIRE(cs[0]->wait());
    return std::move(cs[0]);
  };
  // A prompt that opens the block (as templates whose generation prompt ends in "<think>\n"
  // do) and whose free answer runs to its length limit (random weights may end it early).
  GenerationRequest free_run;
  std::unique_ptr<test::Collector> unbounded;
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> prompt = test::prompt_of(*f.tok, i, 3);
    for (int32_t t : f.tok->encode(" <think>\n", false, false)) prompt.push_back(t);
    free_run = test::greedy(prompt, 12);
    unbounded = run_one(free_run);
    if (unbounded->end.usage.completion_tokens == 12) break;
  }
  REQUIRE(unbounded->end.usage.completion_tokens == 12);
  REQUIRE(unbounded->text.find("</think>") == std::string::npos);  // random weights never close it
  GenerationRequest bounded = free_run;
  bounded.reasoning.max_tokens = 4;
  bounded.reasoning.inside = true;
  bounded.reasoning.close_tokens = f.tok->encode(close, false, true);
  const auto n_close = static_cast<int32_t>(bounded.reasoning.close_tokens.size());
  bounded.max_tokens = 4 + n_close + 3;
  std::unique_ptr<test::Collector> c = run_one(bounded);
  INFO("unbounded: " << unbounded->text << "\nbounded: " << c->text << " (" << c->end.finish_reason << ")");
  const size_t at = c->text.find(close);
  REQUIRE(at != std::string::npos);
  // The 4 tokens before the close are the model's own, as unbounded; then the close, then
  // the answer goes on (sampled again) to the length limit, or to an end-of-generation token.
  CHECK(c->text.substr(0, at) == unbounded->text.substr(0, at));
  if (c->end.finish_reason == "length") {
    CHECK(c->end.usage.completion_tokens == bounded.max_tokens);
    CHECK(c->text.size() > at + close.size());
  } else {
    CHECK(c->end.usage.completion_tokens > 4 + n_close);
  }
}
