// The step budget: next to a decoding stream, a step reads only as many prompt tokens as
// the learned costs fit in --step-budget-ms, and prompts that arrive together share them.
// Time here is a fake clock that advances by a modelled cost of each forward pass, so the
// checks are exact and no wall clock is read.
#include "engine/scheduler/step_budget.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>

#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

namespace {

// A step costs 6 ms, 4 ms per decoding sequence and, per prompt token, 0.8 ms plus 2 µs per
// token of context it attends to (attention grows with the position). Not far from the
// default model on 2 CPU cores, in shape.
double modelled_ms(const StepShape& s) {
  return 6 + 4.0 * s.n_decode + static_cast<double>(s.n_prefill) * (0.8 + 0.002 * s.prefill_pos);
}

class FakeClock final : public StepClock {
 public:
  Clock::time_point now() const override { return Clock::time_point(std::chrono::nanoseconds(ns_.load())); }
  void on_forward(const StepShape& s) override {
    const double ms = modelled_ms(s);
    ns_ += static_cast<int64_t>(ms * 1e6);
    std::lock_guard<std::mutex> lock(m_);
    steps_.push_back({s, ms});
  }
  struct Step {
    StepShape shape;
    double ms;
  };
  std::vector<Step> steps() const {
    std::lock_guard<std::mutex> lock(m_);
    return steps_;
  }
  void forget_steps() {
    std::lock_guard<std::mutex> lock(m_);
    steps_.clear();
  }

 private:
  std::atomic<int64_t> ns_{int64_t{1000} * 1000 * 1000 * 1000};  // 1000 s: never the zero time point
  mutable std::mutex m_;
  std::vector<Step> steps_;
};

// Holds the engine thread inside a request's event callback from its n-th event until
// open(): the test submits more requests meanwhile, and they are admitted together.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  int events = 0, at = 0;
  bool opened = false;
  std::function<void()> callback(Collector& c, int n) {
    at = n;
    return [this, s = c.signal] {
      s->notify();
      std::unique_lock<std::mutex> lock(m);
      if (++events == at) cv.notify_all();
      cv.wait(lock, [&] { return opened || events < at; });
    };
  }
  bool reached() {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, kHangGuard, [&] { return events >= at; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(m);
      opened = true;
    }
    cv.notify_all();
  }
};

std::vector<int32_t> long_prompt(int salt, int n) {
  std::vector<int32_t> p{1};
  for (int i = 1; i < n; ++i) p.push_back(3 + (i * 7 + salt * 13) % 300);
  return p;
}

// A greedy request that generates n tokens without meeting an end of generation (found by
// running candidates alone), so it is still streaming while other prompts are read.
GenerationRequest endless_stream(Fixture& f, int32_t n) {
  for (int i = 0; i < 40; ++i) {
    GenerationRequest r = greedy(prompt_of(*f.tok, i, 4), n);
    if (alone_result(f, r, 1024).finish_reason == "length") return r;
  }
  FAIL("no candidate prompt generates " << n << " tokens");
  return {};
}

SchedulerOptions budget_options(std::shared_ptr<StepClock> clock) {
  SchedulerOptions so;
  so.n_parallel = 3;
  so.n_ctx = 1024;
  so.prefill_chunk = 512;  // the upper bound: what a step reads with no stream waiting
  so.step_budget_ms = 50;
  so.prefix_cache = false;
  so.clock = std::move(clock);
  return so;
}

// TTFT (fake ms) of a prompt read with nothing else running.
double ttft_alone(Fixture& f, const GenerationRequest& r) {
  auto sched =
      std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, budget_options(std::make_shared<FakeClock>())));
  Collector c;
  Submitted s = sched->submit(r, c.callback());
  REQUIRE(s.status == SubmitStatus::Accepted);
  c.handle = s.handle;
  REQUIRE(c.wait());
  return c.end.timings.ttft_ms;
}

}  // namespace

TEST_CASE("a stream's longest gap stays within the step budget while a long prompt is read") {
  Fixture f("llama");
  const GenerationRequest stream = endless_stream(f, 200);
  const GenerationRequest long_one = greedy(long_prompt(1, 800), 1);
  const double alone_ms = ttft_alone(f, long_one);

  auto clock = std::make_shared<FakeClock>();
  const SchedulerOptions so = budget_options(clock);
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  Collector a, b;
  Gate gate;
  Submitted sa = sched->submit(stream, gate.callback(a, 5));
  REQUIRE(sa.status == SubmitStatus::Accepted);
  a.handle = sa.handle;
  REQUIRE(gate.reached());  // the stream is decoding, one token a step
  Submitted sb = sched->submit(long_one, b.callback());
  REQUIRE(sb.status == SubmitStatus::Accepted);
  b.handle = sb.handle;
  gate.open();
  REQUIRE(b.wait());
  a.handle->cancel();
  REQUIRE(a.wait());
  REQUIRE(a.end.finish_reason == "cancelled");  // it streamed all through the long prompt

  INFO("the long prompt's TTFT: " << b.end.timings.ttft_ms << " ms beside the stream, " << alone_ms << " alone");
  INFO("the stream's longest gap: " << a.end.timings.itl_max_ms << " ms, budget " << so.step_budget_ms);
  CHECK(a.end.timings.itl_max_ms <= so.step_budget_ms);
  CHECK(b.end.timings.ttft_ms <= 1.5 * alone_ms);
  int mixed = 0;
  for (const FakeClock::Step& s : clock->steps()) {
    if (s.shape.n_decode == 0) continue;
    INFO("a step with " << s.shape.n_decode << " decode and " << s.shape.n_prefill << " prompt tokens at position "
                        << s.shape.prefill_pos);
    CHECK(s.ms <= so.step_budget_ms);
    mixed += s.shape.n_prefill > 0;
  }
  // The prompt was read in budget-sized pieces, not the 512-token upper bound.
  CHECK(mixed >= 800 / 512 + 5);
  const SchedulerStats st = sched->stats();
  CHECK(st.step_ms.count == st.steps_total);
  CHECK(st.step_ms.count == clock->steps().size());
}

TEST_CASE("two long prompts that arrive together both move at every step") {
  Fixture f("llama");
  auto clock = std::make_shared<FakeClock>();
  const SchedulerOptions so = budget_options(clock);
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  Collector a, b, c;
  Gate gate;
  Submitted sa = sched->submit(endless_stream(f, 200), gate.callback(a, 5));
  REQUIRE(sa.status == SubmitStatus::Accepted);
  a.handle = sa.handle;
  REQUIRE(gate.reached());
  Submitted sb = sched->submit(greedy(long_prompt(2, 600), 1), b.callback());
  Submitted sc = sched->submit(greedy(long_prompt(3, 600), 1), c.callback());
  REQUIRE(sb.status == SubmitStatus::Accepted);
  REQUIRE(sc.status == SubmitStatus::Accepted);
  b.handle = sb.handle;
  c.handle = sc.handle;
  clock->forget_steps();
  gate.open();
  REQUIRE(b.wait());
  REQUIRE(c.wait());
  a.handle->cancel();
  REQUIRE(a.wait());

  // Steps that read prompt tokens: both prompts in each, but for at most one last step
  // that finishes the one that got fewer tokens (an odd share's last token goes to the one
  // with more left to read).
  int both = 0, one = 0;
  for (const FakeClock::Step& s : clock->steps()) {
    if (s.shape.n_prefill == 0) continue;
    if (s.shape.n_prefill_seqs == 2) {
      CHECK(one == 0);  // never both again after one of them finished
      ++both;
    } else {
      ++one;
    }
    CHECK(s.ms <= so.step_budget_ms);
  }
  CHECK(both >= 10);
  CHECK(one <= 1);
  INFO("TTFTs: " << b.end.timings.ttft_ms << " and " << c.end.timings.ttft_ms << " ms");
  CHECK(std::abs(b.end.timings.ttft_ms - c.end.timings.ttft_ms) <= so.step_budget_ms);
  CHECK(a.end.timings.itl_max_ms <= so.step_budget_ms);
}

TEST_CASE("without a stream waiting a step reads the whole prefill chunk, and budget 0 restores fixed chunks") {
  Fixture f("llama");
  for (double budget : {50.0, 0.0}) {
    auto clock = std::make_shared<FakeClock>();
    SchedulerOptions so = budget_options(clock);
    so.step_budget_ms = budget;
    so.prefill_chunk = 128;
    auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
    Collector b;
    Submitted sb = sched->submit(greedy(long_prompt(4, 300), 1), b.callback());
    REQUIRE(sb.status == SubmitStatus::Accepted);
    b.handle = sb.handle;
    REQUIRE(b.wait());
    std::vector<int64_t> chunks;
    for (const FakeClock::Step& s : clock->steps()) chunks.push_back(s.shape.n_prefill);
    CHECK(chunks == std::vector<int64_t>{128, 128, 44});
  }
}

TEST_CASE("the cost model learns a line, and sizes a step to fit the budget") {
  StepCostModel m;
  CHECK(m.prefill_tokens(100, 1, 0, 512) == StepCostModel::kProbeTokens);  // nothing known: probe
  for (int n = 1; n <= 3; ++n) m.observe({n, 0, 0, 0}, 5 + 3.0 * n);
  CHECK(m.decode_ms(2) == Approx(11));
  for (int pos : {10, 100, 300, 700}) {
    StepShape s{1, 40, 1, static_cast<double>(pos)};
    m.observe(s, 8 + 40 * (1.0 + 0.01 * pos));
  }
  CHECK(m.prefill_ms_per_token(500) == Approx(6.0));
  // 92 ms left beside one stream; tokens from position 1000 cost 11 ms and more each.
  const int64_t n = m.prefill_tokens(100, 1, 1000, 512);
  CHECK(n >= 6);
  CHECK(8 + n * (1.0 + 0.01 * (1000 + n / 2.0)) <= 100);
  CHECK(m.prefill_tokens(100, 1, 0, 8) == 8);  // the upper bound
  // The decode part alone (8 ms) fills a 5 ms budget: prompt tokens still get twice its
  // time (16 tokens of ~1 ms), so a prompt read beside the stream keeps 2/3 of its speed.
  for (double budget : {5.0, 20.0}) {
    const int64_t floor = m.prefill_tokens(budget, 1, 0, 512);
    CHECK(floor >= 15);  // 16 ms / 1.0 ms, rounded down
    CHECK(floor <= 16);
  }
}

// A prompt token beside a stream can cost more than alone (small chunks share less): with
// the speed alone known, a step reads enough tokens that the prompt keeps 2/3 of it, past
// the budget but within 1.3 times its planned share.
TEST_CASE("beside a stream a step reads enough of a prompt to keep 2/3 of its speed alone") {
  StepCostModel m;
  for (int i = 0; i < 3; ++i) m.observe({0, 128, 1, 64.0 * i}, 128 * 4.5);           // alone: 4.5 ms a token
  m.observe({1, 0, 0, 0}, 25);                                                       // a decode step: 25 ms
  for (int i = 0; i < 8; ++i) m.observe({1, 10, 1, 100.0 + 25 * i}, 25 + 10 * 5.0);  // beside: 5.0
  const double pa = m.alone_ms_per_token(300), p = m.prefill_ms_per_token(300), d = m.decode_ms(1);
  CHECK(pa == Approx(4.5));
  CHECK(p > 4.9);
  CHECK(d == Approx(25));
  // The budget alone would give (90 - 25) / p ~ 13 tokens, and the prompt would move at
  // less than 2/3 of its speed alone. The step reads the fewest tokens that keep 2/3:
  // n / (d + n p) >= (2/3) / pa, i.e. n (3 pa - 2 p) >= 2 d.
  const int64_t n = m.prefill_tokens(100, 1, 300, 512);
  CHECK(n > static_cast<int64_t>((0.9 * 100 - d) / p));
  CAPTURE(n, p, pa, d);
  CHECK(n * (3 * pa - 2 * p) >= 2 * d);
  CHECK((n - 1) * (3 * pa - 2 * p) < 2 * d);
  CHECK(d + n * p <= StepCostModel::kMaxStretch * StepCostModel::kPlannedShare * 100);
  // When 2/3 cannot be kept within kMaxStretch times the planned share, the step stops there.
  const int64_t capped = m.prefill_tokens(70, 1, 300, 512);
  CHECK(capped < n);
  const double plan = StepCostModel::kMaxStretch * StepCostModel::kPlannedShare * 70;
  CHECK(d + capped * p <= plan);
  CHECK(d + (capped + 1) * p > plan);
}

// A backend whose decode step alone overruns the budget (Vulkan on Mesa's software device:
// 470-750 ms for one token of the default model, ~150 ms a prompt token in large chunks).
// No step can meet the budget, so the prompt keeps 2/3 of its speed alone instead, in
// steps of at most kSlowStretch times the decode part.
TEST_CASE("when a decode step alone overruns the budget, a prompt beside it keeps 2/3 of its speed alone") {
  for (const double p_beside : {145.0, 200.0}) {
    StepCostModel m;
    for (int i = 0; i < 3; ++i) m.observe({0, 128, 1, 64.0 * i}, 128 * 140.0);
    m.observe({1, 0, 0, 0}, 750);
    for (int i = 0; i < 8; ++i) m.observe({1, 10, 1, 100.0 + 25 * i}, 750 + 10 * p_beside);
    const double pa = m.alone_ms_per_token(300), p = m.prefill_ms_per_token(300), d = m.decode_ms(1);
    CAPTURE(p_beside, pa, p, d);
    REQUIRE(d == Approx(750));
    const int64_t n = m.prefill_tokens(100, 1, 300, 512);
    CAPTURE(n);
    const double longest = StepCostModel::kSlowStretch * d;
    CHECK(d + n * p <= longest);
    if (p_beside == 145.0) {
      // 2/3 is within reach: the fewest tokens that keep it (n (3 pa - 2 p) >= 2 d).
      CHECK(n * (3 * pa - 2 * p) >= 2 * d);
      CHECK((n - 1) * (3 * pa - 2 * p) < 2 * d);
      // Twice the decode part's worth alone (the plain floor) would leave the prompt at
      // under 2/3 of its speed.
      CHECK(n > static_cast<int64_t>(StepCostModel::kMinPrefillPerDecode * d / p));
    } else {
      // It is not (a token beside costs 1.4 times its cost alone): the longest step allowed.
      CHECK(n * (3 * pa - 2 * p) < 2 * d);
      CHECK(d + (n + 1) * p > longest);
    }
  }
}
