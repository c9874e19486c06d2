// Shared by the scheduler and prompt-cache tests: a synthetic model on the CPU backend,
// a collector of one request's events, and the single-sequence reference run.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "engine/scheduler/generate.h"
#include "engine/scheduler/kv_store.h"
#include "engine/scheduler/scheduler.h"
#include "tests/test_util.h"
#include "tests/tools/synthetic_model.h"

namespace hearth::test {

struct Fixture {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;

  explicit Fixture(const std::string& arch, uint64_t seed = 1) {
    test::SyntheticOptions o;
    o.arch = arch;
    o.seed = seed;
    o.type = DType::Q8_0;
    bytes = std::move(*test::make_synthetic_model(o));
    file = std::move(*gguf::File::from_memory(bytes.data(), bytes.size()));
    backend = cpu::make_cpu_backend({2});
    model = std::move(*Model::load(file, *backend));
    tok = std::move(*Tokenizer::from_gguf(*file));
  }
};

// Collects one request's events; wait() blocks until Finished or Failed.
struct Collector {
  // What the engine thread touches when it signals an event. Shared with the callback, so a
  // signal that comes after wait() has returned (the engine calls the callback just after
  // pushing the Finished event) never touches a Collector the test has already destroyed.
  struct Signal {
    std::mutex m;
    std::condition_variable cv;
    void notify() {
      // Under the mutex: otherwise an event pushed between wait()'s look at the events and
      // its sleep wakes nobody, and wait() sleeps until its hang guard (a lost wake-up; CI
      // once failed here "after 61 s").
      std::lock_guard<std::mutex> lock(m);
      cv.notify_all();
    }
  };
  std::shared_ptr<Signal> signal = std::make_shared<Signal>();
  std::shared_ptr<RequestHandle> handle;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // of every Text event (top_logprobs >= 0)
  RequestEvent end;
  bool done = false;
  int n_text_events = 0;

  // Called on the engine thread after each event.
  std::function<void()> callback() {
    return [s = signal] { s->notify(); };
  }
  // Returns false when no Finished or Failed event came within `guard` (a hang guard, see
  // kHangGuard), after adding a message to the failing check that follows: how long it
  // waited and what the request had produced so far.
  bool wait(std::chrono::milliseconds guard = kHangGuard) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    std::unique_lock<std::mutex> lock(signal->m);
    for (;;) {
      for (RequestEvent& ev : handle->take_events()) {
        if (ev.kind == RequestEvent::Kind::Text) {
          text += ev.text;
          ++n_text_events;
          logprobs.insert(logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
        } else {
          end = std::move(ev);
          done = true;
        }
      }
      if (done) return true;
      if (signal->cv.wait_until(lock, deadline) == std::cv_status::timeout &&
          std::chrono::steady_clock::now() >= deadline) {
        UNSCOPED_INFO("hang guard: the request did not finish or fail within "
                      << std::chrono::duration_cast<std::chrono::seconds>(guard).count() << " s; it had sent "
                      << n_text_events << " text events so far (" << text.size() << " bytes: \"" << text << "\")");
        return false;
      }
    }
  }
};

inline GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

inline std::vector<int32_t> prompt_of(const Tokenizer& tok, int i, int words) {
  std::string s;
  for (int w = 0; w < words; ++w)
    s += (w % 3 == 0 ? "abc " : w % 3 == 1 ? "the " : "xyz ") + std::to_string(i * 7 + w) + " ";
  return tok.encode(s, true, false);
}

// The single-sequence reference: generate() on a fresh context.
inline GenerateResult alone_result(Fixture& f, const GenerationRequest& r, int32_t n_ctx = 512,
                                   DType kv_type = DType::F16) {
  ContextOptions co;
  co.n_ctx = n_ctx;
  co.kv_type = kv_type;
  auto ctx = std::move(*InferenceContext::create(*f.model, *f.backend, co));
  GenerateOptions go;
  go.max_tokens = r.max_tokens;
  go.sampling = r.sampling;
  Result<GenerateResult> g = generate(*ctx, *f.tok, r.prompt, go, nullptr);
  if (!g) FAIL(g.error().message);
  return std::move(*g);
}
inline std::string alone(Fixture& f, const GenerationRequest& r, DType kv_type = DType::F16) {
  return alone_result(f, r, 512, kv_type).text;
}

// What one finished request gave.
struct Run {
  std::string text;
  RequestUsage usage;
  std::string finish_reason;
  RequestTimings timings;
};

// Submits every request at once (each must be accepted); one collector per request.
inline std::vector<std::unique_ptr<Collector>> submit_all(Scheduler& s, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::unique_ptr<Collector>> cs;
  for (const GenerationRequest& r : reqs) {
    cs.push_back(std::make_unique<Collector>());
    Submitted sub = s.submit(r, cs.back()->callback());
    REQUIRE(sub.status == SubmitStatus::Accepted);
    cs.back()->handle = sub.handle;
  }
  return cs;
}

// Submits `r` and holds the engine thread inside the request's `at`-th event (inside a
// verification, when every step drafts) until `held` has run on the test thread; then
// cancels the request and returns once it ended. The gate lives as long as the callback,
// so the engine may still be leaving on_event when this returns.
inline void cancel_while_held(Scheduler& s, GenerationRequest r, Collector& c, const std::function<void()>& held,
                              int at = 6) {
  struct Gate {
    std::mutex m;
    std::condition_variable cv;
    int n_events = 0;
    bool cancelled = false;
  };
  auto gate = std::make_shared<Gate>();
  Submitted sub = s.submit(std::move(r), [gate, signal = c.signal, at] {
    signal->notify();
    std::unique_lock<std::mutex> lock(gate->m);
    if (++gate->n_events == at) gate->cv.notify_all();
    gate->cv.wait(lock, [&] { return gate->cancelled || gate->n_events < at; });
  });
  REQUIRE(sub.status == SubmitStatus::Accepted);
  c.handle = sub.handle;
  {
    std::unique_lock<std::mutex> lock(gate->m);
    REQUIRE(gate->cv.wait_for(lock, kHangGuard, [&] { return gate->n_events >= at; }));
  }
  held();
  sub.handle->cancel();
  {
    std::lock_guard<std::mutex> lock(gate->m);
    gate->cancelled = true;
  }
  gate->cv.notify_all();
  REQUIRE(c.wait());
}

// Runs one request to its end; it must finish (not fail).
inline Run run_one(Scheduler& s, GenerationRequest r) {
  Collector c;
  Submitted sub = s.submit(std::move(r), c.callback());
  REQUIRE(sub.status == SubmitStatus::Accepted);
  c.handle = sub.handle;
  REQUIRE(c.wait());
  REQUIRE(c.end.kind == RequestEvent::Kind::Finished);
  return {c.text, c.end.usage, c.end.finish_reason, c.end.timings};
}

// n tokens: BOS, then random ids in [3, 303) from seed.
inline std::vector<int32_t> random_prompt(int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p{1};  // BOS
  while (static_cast<int32_t>(p.size()) < n) p.push_back(3 + static_cast<int32_t>(rng() % 300));
  return p;
}

// 8 sequences of 512 tokens, 48-token prefill chunks; the fingerprint a disk tier needs.
inline SchedulerOptions options(const std::string& fingerprint = "") {
  SchedulerOptions so;
  so.n_parallel = 8;
  so.n_ctx = 512;
  so.prefill_chunk = 48;
  so.model_fingerprint = fingerprint;
  return so;
}

// A scheduler whose disk tier is a chunk store in cache_dir, as the daemon opens it.
inline std::unique_ptr<Scheduler> with_store(const Model& model, Backend& backend, const Tokenizer& tok,
                                             const SchedulerOptions& so, const std::filesystem::path& cache_dir) {
  Result<std::unique_ptr<storage::ChunkStore>> store =
      open_kv_store(model.config(), so.kv_type, so.model_fingerprint, cache_dir.string(), uint64_t{4} << 30);
  REQUIRE(store.ok());
  Result<std::unique_ptr<Scheduler>> s = Scheduler::create(model, backend, tok, so, std::move(*store));
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace hearth::test
