// The scheduler's promises: a request's greedy tokens do not depend on what else runs
// beside it or on how its prompt is chunked; cancelling frees its sequence and blocks;
// the queue is bounded; bad requests are refused with a reason; the end names the stop string
// that ended an answer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

TEST_CASE("scheduled greedy output equals the same request run alone, whatever runs beside it") {
  for (const char* arch : {"llama", "gemma3"}) {
    Fixture f(arch);
    std::vector<GenerationRequest> reqs;
    std::vector<std::string> expected;
    for (int i = 0; i < 7; ++i) {
      reqs.push_back(greedy(prompt_of(*f.tok, i, 3 + 6 * i), 12 + i));
      expected.push_back(alone(f, reqs.back()));
    }
    // Small prefill chunks and 3 sequences at once: prompts are read over several steps
    // interleaved with the others' decode steps, and 4 requests queue.
    for (int32_t chunk : {5, 0}) {
      SchedulerOptions so;
      so.n_parallel = 3;
      so.n_ctx = 512;
      so.prefill_chunk = chunk;
      so.block_tokens = 16;
      auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
      std::vector<std::unique_ptr<Collector>> cs = submit_all(*sched, reqs);
      for (size_t i = 0; i < cs.size(); ++i) {
        INFO(arch << " chunk " << chunk << " request " << i);
        REQUIRE(cs[i]->wait());
        REQUIRE(cs[i]->end.kind == RequestEvent::Kind::Finished);
        CHECK(cs[i]->text == expected[i]);
        CHECK(cs[i]->end.usage.prompt_tokens == static_cast<int32_t>(reqs[i].prompt.size()));
        CHECK(cs[i]->end.usage.completion_tokens <= reqs[i].max_tokens);
        CHECK(cs[i]->end.timings.ttft_ms > 0);
      }
      const SchedulerStats st = sched->stats();
      CHECK(st.running == 0);
      CHECK(st.kv_blocks_used == 0);
      CHECK(st.ttft_ms.count == reqs.size());
    }
  }
}

TEST_CASE("a cancelled request ends with cancelled and gives its KV blocks back") {
  Fixture f("llama");
  SchedulerOptions so;
  so.n_parallel = 2;
  so.n_ctx = 256;
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  Collector running, queued_behind;
  GenerationRequest r = greedy(prompt_of(*f.tok, 1, 4), -1);
  r.sampling.temperature = 1.0f;  // sample: avoid an early end-of-generation token
  r.sampling.seed = 7;
  // The engine thread calls on_event; from the 5th event on it waits there until this
  // thread has cancelled, so the request cannot reach its length limit first however slowly
  // this thread runs.
  std::mutex gate_m;
  std::condition_variable gate_cv;
  int n_events = 0;
  bool cancelled = false;
  auto on_event = [&] {
    running.signal->notify();
    std::unique_lock<std::mutex> lock(gate_m);
    if (++n_events == 5) gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return cancelled || n_events < 5; });
  };
  Submitted a = sched->submit(r, on_event);
  REQUIRE(a.status == SubmitStatus::Accepted);
  running.handle = a.handle;
  {
    std::unique_lock<std::mutex> lock(gate_m);
    const bool generating = gate_cv.wait_for(lock, kHangGuard, [&] { return n_events >= 5; });
    INFO("hang guard: waited for 5 events of the running request; got " << n_events);
    REQUIRE(generating);
  }
  CHECK(sched->stats().kv_blocks_used > 0);
  a.handle->cancel();
  {
    std::lock_guard<std::mutex> lock(gate_m);
    cancelled = true;
  }
  gate_cv.notify_all();
  REQUIRE(running.wait());
  CHECK(running.end.finish_reason == "cancelled");
  // The handle's Finished event may come just before the engine drops the sequence.
  CHECK(eventually([&] { return sched->stats().running == 0; }));
  const SchedulerStats st = sched->stats();
  CHECK(st.running == 0);
  CHECK(st.kv_blocks_used == 0);
  CHECK(st.cancelled_total == 1);
  // The engine thread may still be in on_event for the Finished event, which uses the
  // locals above: stop it before they go.
  sched.reset();
}

TEST_CASE("the wait queue is bounded and stop_accepting refuses new requests") {
  Fixture f("llama");
  SchedulerOptions so;
  so.n_parallel = 1;
  so.queue_max = 2;
  so.n_ctx = 256;
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  std::vector<std::unique_ptr<Collector>> cs;
  int full = 0;
  for (int i = 0; i < 12; ++i) {
    auto c = std::make_unique<Collector>();
    Submitted s = sched->submit(greedy(prompt_of(*f.tok, i, 30), 200), c->callback());
    if (s.status == SubmitStatus::QueueFull) {
      ++full;
      CHECK_FALSE(s.message.empty());
      continue;
    }
    REQUIRE(s.status == SubmitStatus::Accepted);
    c->handle = s.handle;
    cs.push_back(std::move(c));
  }
  CHECK(full >= 12 - 4);
  sched->stop_accepting();
  Collector late;
  CHECK(sched->submit(greedy({1, 5, 6}, 3), late.callback()).status == SubmitStatus::ShuttingDown);
  sched->cancel_all();
  for (auto& c : cs) {
    REQUIRE(c->wait());
    CHECK(c->end.kind == RequestEvent::Kind::Finished);
  }
  CHECK(sched->in_flight() == 0);
}

TEST_CASE("invalid requests are refused with a reason and length limits end generation") {
  Fixture f("gemma3");
  SchedulerOptions so;
  so.n_parallel = 2;
  so.n_ctx = 64;
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  Collector c;
  auto status = [&](GenerationRequest r) { return sched->submit(std::move(r), c.callback()).status; };
  CHECK(status(greedy({}, 4)) == SubmitStatus::Invalid);
  CHECK(status(greedy(std::vector<int32_t>(64, 5), 4)) == SubmitStatus::Invalid);
  CHECK(status(greedy({1, 100000}, 4)) == SubmitStatus::Invalid);
  CHECK(status(greedy({1, -1}, 4)) == SubmitStatus::Invalid);
  GenerationRequest bad = greedy({1, 5}, 4);
  bad.sampling.top_p = 2.0f;
  Submitted s = sched->submit(bad, c.callback());
  CHECK(s.status == SubmitStatus::Invalid);
  CHECK(s.message.find("top_p") != std::string::npos);

  // A prompt of n_ctx - 1 tokens leaves room for exactly one token.
  Collector one;
  Submitted ok = sched->submit(greedy(std::vector<int32_t>(63, 9), -1), one.callback());
  REQUIRE(ok.status == SubmitStatus::Accepted);
  one.handle = ok.handle;
  REQUIRE(one.wait());
  CHECK(one.end.usage.completion_tokens == 1);
  CHECK(one.end.finish_reason == "length");
  // generate() runs the same loop: the same one token at the same edge, and the same
  // refusals with the same messages.
  const GenerateResult g = alone_result(f, greedy(std::vector<int32_t>(63, 9), -1), 64);
  CHECK(g.text == one.text);
  CHECK(g.timings.generated_tokens == 1);
  CHECK(g.finish_reason == "length");
  ContextOptions co;
  co.n_ctx = 64;
  auto ctx = std::move(*InferenceContext::create(*f.model, *f.backend, co));
  for (const std::vector<int32_t>& prompt :
       {std::vector<int32_t>{}, std::vector<int32_t>(64, 5), std::vector<int32_t>{1, 100000}}) {
    Result<GenerateResult> r = generate(*ctx, *f.tok, prompt, GenerateOptions{}, nullptr);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == sched->submit(greedy(prompt, 4), c.callback()).message);
  }
}

TEST_CASE("the finished event names the stop string that ended the answer, and none otherwise") {
  Fixture f("llama");
  SchedulerOptions so;
  so.n_ctx = 256;
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  auto finish = [&](GenerationRequest r) {
    Collector c;
    Submitted sub = sched->submit(std::move(r), c.callback());
    REQUIRE(sub.status == SubmitStatus::Accepted);
    c.handle = sub.handle;
    REQUIRE(c.wait());
    REQUIRE(c.end.kind == RequestEvent::Kind::Finished);
    return std::pair{c.text, c.end};
  };
  // Four ASCII bytes of text from `from` back (a stop string must be whole UTF-8).
  auto ascii_before = [](const std::string& text, size_t from) -> std::optional<size_t> {
    for (size_t at = std::min(from, text.size() < 4 ? 0 : text.size() - 4) + 1; at-- > 0;) {
      bool ascii = at + 4 <= text.size();
      for (size_t k = at; ascii && k < at + 4; ++k) ascii = static_cast<unsigned char>(text[k]) < 0x80;
      if (ascii) return at;
    }
    return std::nullopt;
  };
  // The synthetic model's answers end by length or by its end-of-generation token: neither
  // names a stop string. Then a piece of one of them, made a stop string, is named.
  int n_cut = 0;
  for (int i = 0; i < 8; ++i) {
    const GenerationRequest r = greedy(prompt_of(*f.tok, i, 6), 24);
    const auto [text, end] = finish(r);
    INFO("prompt " << i << ", " << end.finish_reason << " after " << text.size() << " bytes");
    CHECK(end.stop_sequence.empty());
    const std::optional<size_t> at = ascii_before(text, text.size() / 2);
    if (end.finish_reason != "length" || !at) continue;
    const std::string stop = text.substr(*at, 4);
    GenerationRequest with_stop = r;
    with_stop.stop = {"never in this text", stop};
    const auto [cut_text, cut_end] = finish(with_stop);
    CHECK(cut_end.finish_reason == "stop");
    CHECK(cut_end.stop_sequence == stop);
    CHECK(cut_text == text.substr(0, text.find(stop)));
    ++n_cut;
  }
  CHECK(n_cut > 0);
}
