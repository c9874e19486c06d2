// What the engine does when the device fails a transfer or a pass (issue 17): a restore from
// disk or a partial-block copy that fails is computed instead, so the answer is still the
// cold one; a chunk that cannot be read for the disk tier is not written; a failed forward
// pass or logits read fails the requests of that step with an error, and the engine serves
// the next request correctly. Never a wrong answer. The faults come from FaultyBackend,
// wrapped around the CPU backend after the model is loaded.
#include <catch2/catch.hpp>

#include "tests/engine/faulty_backend.h"
#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

namespace {

// One request's end: Finished (with its text) or Failed (with its error).
RequestEvent run_to_end(Scheduler& s, const GenerationRequest& r, std::string* text) {
  Collector c;
  Submitted sub = s.submit(r, c.callback());
  REQUIRE(sub.status == SubmitStatus::Accepted);
  c.handle = sub.handle;
  REQUIRE(c.wait());
  *text = c.text;
  return c.end;
}

// Warms r's prompt to disk in dir with a healthy backend and waits for the writer.
void warm_to_disk(Fixture& f, const GenerationRequest& r, const TempDir& dir) {
  auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
  GenerationRequest warm = r;
  warm.warm = true;
  REQUIRE(run_one(*sched, warm).finish_reason == "warmed");
  REQUIRE(sched->close_cache(kHangGuard) == 0);
}

}  // namespace

TEST_CASE("a restore from disk whose device write fails is computed instead and gives the cold answer") {
  TempDir dir;
  Fixture f("gemma3");
  const GenerationRequest r = greedy(random_prompt(300, 5), 10);
  const std::string cold = alone(f, r);
  warm_to_disk(f, r, dir);
  FaultyBackend faulty(*f.backend);
  auto sched = with_store(*f.model, faulty, *f.tok, options("fp-a"), dir.path());
  // Every chunk is one block. Chunks outside the last window (4 tokens) are restored
  // without their sliding-window layers: K and V of the synthetic gemma3's one global
  // layer, two writes a chunk. The fault hits the fifth chunk's K.
  faulty.fail_nth(FaultyBackend::Write, 4 * 2 + 1);
  const Run hit = run_one(*sched, r);
  CHECK(faulty.failures() == 1);
  CHECK(hit.text == cold);
  CHECK(hit.usage.cached_disk_tokens == 4 * 16);
  CHECK(hit.usage.prefilled_tokens == 300 - 4 * 16);
  // Nothing of the failed chunk stayed named: the next run finds the prompt in memory,
  // computed by the first, and still gives the cold answer.
  const Run again = run_one(*sched, r);
  CHECK(again.text == cold);
  CHECK(again.usage.cached_tokens == 299);
  CHECK(sched->close_cache(kHangGuard) == 0);
}

TEST_CASE("a partial block whose device copy fails is computed instead and gives the cold answer") {
  Fixture f("gemma3");
  FaultyBackend faulty(*f.backend);
  auto sched = std::move(*Scheduler::create(*f.model, faulty, *f.tok, options()));
  const GenerationRequest r = greedy(random_prompt(150, 1), 12);
  const std::string cold = alone(f, r);
  CHECK(run_one(*sched, r).text == cold);
  faulty.fail_nth(FaultyBackend::Copy, 1);
  const Run second = run_one(*sched, r);
  CHECK(faulty.failures() == 1);
  CHECK(second.text == cold);
  CHECK(second.usage.cached_memory_tokens == 144);  // the 9 full blocks; the partial 10th is computed
  CHECK(second.usage.prefilled_tokens == 6);
  const Run third = run_one(*sched, r);
  CHECK(third.text == cold);
  CHECK(third.usage.cached_memory_tokens == 149);
  CHECK(faulty.calls(FaultyBackend::Copy) == 2);
}

TEST_CASE("a chunk the device cannot read back is not written to disk, and a restart computes it") {
  TempDir dir;
  Fixture f("gemma3");
  const GenerationRequest r = greedy(random_prompt(300, 5), 10);
  const std::string cold = alone(f, r);
  {
    FaultyBackend faulty(*f.backend);
    auto sched = with_store(*f.model, faulty, *f.tok, options("fp-a"), dir.path());
    GenerationRequest warm = r;
    warm.warm = true;
    faulty.fail_nth(FaultyBackend::Read, 1);  // the first read of a warm prompt: chunk 0 for the writer
    const Run w = run_one(*sched, warm);
    CHECK(faulty.failures() == 1);
    CHECK(w.finish_reason == "warmed");
    CHECK(w.usage.chunks_written == 18);  // chunks 1-17 and the 12-token tail
    CHECK(sched->close_cache(kHangGuard) == 0);
    CHECK(sched->cache_stats().disk.model_entries == 18);
  }
  // The chain on disk starts with chunk 0, which is missing: nothing restores, all is computed.
  auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
  const Run after = run_one(*sched, r);
  CHECK(after.text == cold);
  CHECK(after.usage.cached_disk_tokens == 0);
  CHECK(sched->close_cache(kHangGuard) == 0);
}

TEST_CASE("a failed forward pass or logits read fails that step's requests with an error, and the engine serves on") {
  Fixture f("gemma3");
  FaultyBackend faulty(*f.backend);
  auto sched = std::move(*Scheduler::create(*f.model, faulty, *f.tok, options()));
  const GenerationRequest r = greedy(random_prompt(100, 3), 8);
  const std::string cold = alone(f, r);
  for (FaultyBackend::Call call : {FaultyBackend::Execute, FaultyBackend::Read}) {
    INFO((call == FaultyBackend::Execute ? "execute" : "logits read"));
    const int before = faulty.failures();
    faulty.fail_nth(call, call == FaultyBackend::Execute ? 2 : 1);
    std::string text;
    const RequestEvent end = run_to_end(*sched, r, &text);
    CHECK(faulty.failures() == before + 1);
    CHECK(end.kind == RequestEvent::Kind::Failed);
    CHECK_THAT(end.error, Catch::Contains("injected fault"));
    // Whatever the failed request left in memory is not reused wrongly.
    const RequestEvent next = run_to_end(*sched, r, &text);
    CHECK(next.kind == RequestEvent::Kind::Finished);
    CHECK(text == cold);
  }
  CHECK(sched->stats().running == 0);
}

TEST_CASE("under a fault at every transfer in turn, each request gets the cold answer or an error, never another") {
  TempDir dir;
  Fixture f("gemma3");
  std::vector<GenerationRequest> reqs;
  std::vector<std::string> cold;
  for (uint32_t i = 0; i < 3; ++i) {
    // Three prompts sharing a 100-token prefix, so memory hits, copies and restores all occur.
    GenerationRequest r = greedy(random_prompt(100, 9), 6);
    const std::vector<int32_t> tail = random_prompt(20 + 7 * static_cast<int32_t>(i), 20 + i);
    r.prompt.insert(r.prompt.end(), tail.begin() + 1, tail.end());
    cold.push_back(alone(f, r));
    reqs.push_back(std::move(r));
  }
  warm_to_disk(f, reqs[0], dir);
  const int rounds = kSanitized ? 12 : 40;
  int failed = 0;
  for (int n = 1; n <= rounds; ++n) {
    INFO("fault at transfer " << n);
    FaultyBackend faulty(*f.backend);
    auto sched = with_store(*f.model, faulty, *f.tok, options("fp-a"), dir.path());
    const FaultyBackend::Call call = static_cast<FaultyBackend::Call>(n % FaultyBackend::kCalls);
    faulty.fail_nth(call, 1 + n / FaultyBackend::kCalls);
    std::vector<std::unique_ptr<Collector>> cs = submit_all(*sched, reqs);
    for (size_t i = 0; i < cs.size(); ++i) {
      REQUIRE(cs[i]->wait());
      if (cs[i]->end.kind == RequestEvent::Kind::Failed) {
        CHECK_THAT(cs[i]->end.error, Catch::Contains("injected fault"));
        ++failed;
      } else {
        CHECK(cs[i]->text == cold[i]);
      }
    }
    // And the engine serves afterwards.
    faulty.heal();
    std::string text;
    CHECK(run_to_end(*sched, reqs[1], &text).kind == RequestEvent::Kind::Finished);
    CHECK(text == cold[1]);
    CHECK(sched->close_cache(kHangGuard) == 0);
  }
  CHECK(failed > 0);  // some faults hit a forward pass or a logits read
}
