// A restore reads the sliding-window layers' KV of the last window only (chunk format 3):
// a prefix ending at any block boundary of a cached prompt resumes with the cold output,
// from disk after a restart and from memory blocks restored without that KV (completed
// from disk, or computed again when the disk lost it), on the synthetic gemma3 (five
// layers with a 4-token window, one global) and on llama (no window: every layer read);
// a restore in the middle of another sequence's decoding changes neither answer; and the
// last, partly filled block a sequence leaves is a tail chunk on disk, so after a restart
// the same prompt resumes at its last token and a chat's next turn at the previous answer's.
#include <pthread.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>

#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

namespace {

constexpr int32_t kBlock = 16;

// The first k blocks of `prompt`, then one token of its own: the token and the first
// answer tokens attend to the restored positions in every sliding-window layer, so KV
// missing there changes the answer.
GenerationRequest prefix_plus(const std::vector<int32_t>& prompt, int32_t k) {
  std::vector<int32_t> p(prompt.begin(), prompt.begin() + k * kBlock);
  p.push_back(3 + (k * 37) % 300);
  return greedy(std::move(p), 8);
}

SchedulerOptions options_kv(DType kv_type) {
  SchedulerOptions so = options("fp-a");
  so.kv_type = kv_type;
  return so;
}

void warm_to_disk(Fixture& f, const std::vector<int32_t>& prompt, const TempDir& dir, DType kv_type = DType::F16) {
  auto sched = with_store(*f.model, *f.backend, *f.tok, options_kv(kv_type), dir.path());
  GenerationRequest warm = greedy(prompt, 1);
  warm.warm = true;
  REQUIRE(run_one(*sched, warm).finish_reason == "warmed");
  REQUIRE(sched->close_cache(kHangGuard) == 0);
}

// Bytes of one token's KV: every layer, and the full-attention layers only.
struct TokenBytes {
  uint64_t all = 0, global = 0;
};
TokenBytes token_bytes(const Fixture& f, DType kv_type = DType::F16) {
  const ModelConfig& c = f.model->config();
  const uint64_t layer = 2 * row_bytes(kv_type, c.kv_dim());
  const auto n_sliding = c.sliding_window > 0 ? std::count(c.layer_swa.begin(), c.layer_swa.end(), true) : 0;
  return {layer * static_cast<uint64_t>(c.n_layer), layer * static_cast<uint64_t>(c.n_layer - n_sliding)};
}

}  // namespace

TEST_CASE("after a restart a prefix ending at any block boundary of a cached prompt resumes from disk") {
  for (const char* arch : {"gemma3", "llama"}) {
    INFO(arch);
    TempDir dir;
    Fixture f(arch);
    const std::vector<int32_t> prompt = random_prompt(200, 11);  // 12 full blocks
    warm_to_disk(f, prompt, dir);
    const TokenBytes tb = token_bytes(f);
    for (int32_t k = 1; k <= 12; ++k) {
      INFO("blocks " << k);
      const GenerationRequest r = prefix_plus(prompt, k);
      const std::string cold = alone(f, r);
      // One sequence of 224 tokens: 14 blocks, all holding another prompt's KV when the
      // restore takes them, so KV it fails to write is stale, not zero.
      SchedulerOptions so = options("fp-a");
      so.n_parallel = 1;
      so.n_ctx = 224;
      auto sched = with_store(*f.model, *f.backend, *f.tok, so, dir.path());
      REQUIRE(run_one(*sched, greedy(random_prompt(222, 900 + static_cast<uint32_t>(k)), 1)).usage.cached_tokens == 0);
      const Run hit = run_one(*sched, r);
      CHECK(hit.text == cold);
      CHECK(hit.usage.cached_disk_tokens == k * kBlock);
      // gemma3's 4-token window lies in the last block: its chunk is read whole, the others
      // without their sliding-window layers. llama's are read whole.
      CHECK(hit.timings.cache_restore_bytes == kBlock * (tb.all + static_cast<uint64_t>(k - 1) * tb.global));
    }
  }
}

TEST_CASE("a prefix of a restored prompt completes its window from disk, or computes it when the disk lost it") {
  TempDir dir;
  Fixture f("gemma3");
  const std::vector<int32_t> prompt = random_prompt(200, 12);
  warm_to_disk(f, prompt, dir);
  const TokenBytes tb = token_bytes(f);
  REQUIRE(tb.global < tb.all);
  auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
  const GenerationRequest whole = greedy(prompt, 6);
  CHECK(run_one(*sched, whole).usage.cached_disk_tokens == 199);  // 12 chunks and 7 tokens of the tail
  // Blocks 0-10 are in memory without their sliding-window KV. A prefix ending in one of
  // them attaches them all and reads that one block's chunk whole.
  for (int32_t k : {11, 5, 1, 8}) {
    INFO("blocks " << k);
    const GenerationRequest r = prefix_plus(prompt, k);
    const Run hit = run_one(*sched, r);
    CHECK(hit.text == alone(f, r));
    CHECK(hit.usage.cached_memory_tokens == k * kBlock);
    CHECK(hit.timings.cache_restore_bytes == kBlock * tb.all);
  }
  // The chunk files go: a prefix ending in a block still without that KV (block 2) cannot
  // complete it, nor block 1 once the prefix is cut there; block 0, completed by the hit
  // on one block above, ends it.
  REQUIRE(sched->close_cache(kHangGuard) == 0);  // the writer is done with the directory
  std::filesystem::remove_all(dir.path() / "chunks");
  const GenerationRequest r = prefix_plus(prompt, 3);
  const std::string cold = alone(f, r);
  const Run miss = run_one(*sched, r);
  CHECK(miss.text == cold);
  CHECK(miss.usage.cached_tokens == kBlock);
  // What it computed took the blocks' names: the same prefix is a whole memory hit now.
  const Run again = run_one(*sched, r);
  CHECK(again.text == cold);
  CHECK(again.usage.cached_memory_tokens + 1 == static_cast<int64_t>(r.prompt.size()));
}

TEST_CASE("a restore from disk while another sequence decodes leaves both answers cold") {
  for (const char* arch : {"gemma3", "llama"}) {
    INFO(arch);
    TempDir dir;
    Fixture f(arch);
    const std::vector<int32_t> prompt = random_prompt(300, 13);
    warm_to_disk(f, prompt, dir);
    const GenerationRequest stream = greedy(random_prompt(40, 14), 200);
    const GenerationRequest hit = prefix_plus(prompt, 17);
    const std::string stream_cold = alone(f, stream), hit_cold = alone(f, hit);
    auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
    // The stream's events cost the engine thread 2 ms each, so it is still decoding when the
    // restore comes and after it ends, however the machine schedules this thread.
    Collector s;
    Submitted sub = sched->submit(stream, [signal = s.signal] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      signal->notify();
    });
    REQUIRE(sub.status == SubmitStatus::Accepted);
    s.handle = sub.handle;
    auto drain = [&s] {
      for (RequestEvent& ev : s.handle->take_events()) {
        if (ev.kind == RequestEvent::Kind::Text) {
          s.text += ev.text;
        } else {
          s.end = std::move(ev);
          s.done = true;
        }
      }
    };
    // The stream has produced a token (it is decoding) before the restore is asked for.
    for (const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
         s.text.empty() && !s.done && std::chrono::steady_clock::now() < deadline;) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE_FALSE(s.done);
    const Run h = run_one(*sched, hit);
    drain();
    CHECK_FALSE(s.done);  // and still decoding when the restored request has finished
    REQUIRE(s.wait());
    CHECK(h.text == hit_cold);
    CHECK(h.usage.cached_disk_tokens == 17 * kBlock);
    CHECK(s.text == stream_cold);
  }
}

TEST_CASE("after a restart a chat's next turn resumes from disk at the last token of the previous answer") {
  for (const char* arch : {"gemma3", "llama"}) {
    INFO(arch);
    TempDir dir;
    Fixture f(arch);
    const GenerationRequest turn1 = greedy(random_prompt(90, 15), 20);
    const GenerateResult answer = alone_result(f, turn1);
    REQUIRE(answer.tokens.size() == 20);
    {
      auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
      REQUIRE(run_one(*sched, turn1).text == answer.text);
      REQUIRE(sched->close_cache(kHangGuard) == 0);
    }
    GenerationRequest turn2 = turn1;
    turn2.prompt.insert(turn2.prompt.end(), answer.tokens.begin(), answer.tokens.end());
    const std::vector<int32_t> message = random_prompt(25, 16);
    turn2.prompt.insert(turn2.prompt.end(), message.begin() + 1, message.end());
    const std::string cold = alone(f, turn2);
    auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
    const Run r2 = run_one(*sched, turn2);
    CHECK(r2.text == cold);
    // Turn 1 computed 90 + 19 tokens (its last answer token was sampled, never run): six
    // chunks and a 13-token tail.
    CHECK(r2.usage.cached_disk_tokens == 109);
    CHECK(r2.usage.prefilled_tokens == 24 + 1);
  }
}

// Chunk files whose reads wait at a gate while it is shut, so that a restore is certainly
// still reading when the test cancels it, however slowly the machine runs the test. A read
// waits until the gate opens after it arrived (a later shut() does not hold it again).
class GatedFileOps : public storage::FileOps {
 public:
  ssize_t pread(int fd, void* data, size_t n, off_t offset) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (shut_) {
        const uint64_t opening = openings_;
        ++waiting_;
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        engine_thread_waited_ = engine_thread_waited_ || std::string_view(name) == "hearth-engine";
        changed_.notify_all();
        changed_.wait_for(lock, kHangGuard, [&] { return openings_ != opening; });
      }
    }
    return storage::FileOps::pread(fd, data, n, offset);
  }
  void shut() {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_ = true;
    waiting_ = 0;
    engine_thread_waited_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_ = false;
    ++openings_;
    changed_.notify_all();
  }
  // Whether a read reached the shut gate within the hang guard.
  bool wait_for_reader() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] { return waiting_ > 0; });
  }
  // Whether the engine thread itself read at the shut gate (a restore read inline).
  bool engine_thread_waited() {
    std::lock_guard<std::mutex> lock(mutex_);
    return engine_thread_waited_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool shut_ = false;
  int waiting_ = 0;
  bool engine_thread_waited_ = false;
  uint64_t openings_ = 0;
};

// A scheduler on the disk tier in dir whose chunk reads pass through gate.
std::unique_ptr<Scheduler> gated_scheduler(Fixture& f, const TempDir& dir, std::shared_ptr<GatedFileOps> gate) {
  const SchedulerOptions so = options("fp-a");
  storage::StoreOptions store_options;
  store_options.dir = dir.path();
  store_options.file_ops = std::move(gate);
  auto store = storage::ChunkStore::open(store_options, kv_format(f.model->config(), so.kv_type, "fp-a"));
  REQUIRE(store.ok());
  auto created = Scheduler::create(*f.model, *f.backend, *f.tok, so, std::move(*store));
  REQUIRE(created.ok());
  return std::move(*created);
}

// Submits a stream whose first event holds the engine thread until release(): a request
// submitted before release() is admitted while the stream still decodes, however the
// machine schedules the test's thread (admitted beside a running sequence, a restore reads
// on the reader threads; admitted alone, it reads inline on the engine thread).
class HeldStream {
 public:
  HeldStream(Scheduler& sched, const GenerationRequest& r) : collector(std::make_unique<Collector>()) {
    Submitted sub = sched.submit(r, [signal = collector->signal, gate = gate_, first = std::make_shared<bool>(true)] {
      if (*first) {
        *first = false;  // the engine thread's own flag
        std::unique_lock<std::mutex> lock(gate->m);
        gate->cv.wait_for(lock, kHangGuard, [&] { return gate->open; });
      }
      signal->notify();
    });
    REQUIRE(sub.status == SubmitStatus::Accepted);
    collector->handle = sub.handle;
  }
  void release() {
    std::lock_guard<std::mutex> lock(gate_->m);
    gate_->open = true;
    gate_->cv.notify_all();
  }
  ~HeldStream() { release(); }
  std::unique_ptr<Collector> collector;

 private:
  struct Gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
};

TEST_CASE("a restore beside a stream that is cancelled while its chunks are read gives every block back") {
  TempDir dir;
  Fixture f("gemma3");
  const std::vector<int32_t> prompt = random_prompt(300, 17);
  warm_to_disk(f, prompt, dir);
  const GenerationRequest stream = greedy(random_prompt(40, 18), 200);
  const GenerationRequest hit = prefix_plus(prompt, 17);
  const std::string stream_cold = alone(f, stream), hit_cold = alone(f, hit);
  const auto gate = std::make_shared<GatedFileOps>();
  const std::unique_ptr<Scheduler> created = gated_scheduler(f, dir, gate);
  Scheduler& sched = *created;
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    gate->shut();
    HeldStream held(sched, stream);
    auto hs = submit_all(sched, {hit});
    held.release();
    Collector& cs = *held.collector;
    const bool reading = gate->wait_for_reader();
    hs[0]->handle->cancel();
    // The cancel ends the restore while its reads are still held: nothing it read is placed,
    // so the next round restores from disk again.
    const bool ended = hs[0]->wait(std::chrono::seconds(60));
    const bool inline_read = gate->engine_thread_waited();
    gate->open();
    REQUIRE(reading);
    REQUIRE_FALSE(inline_read);
    REQUIRE(ended);
    REQUIRE(cs.wait());
    CHECK(cs.text == stream_cold);
    CHECK(hs[0]->end.finish_reason == "cancelled");
  }
  CHECK(sched.stats().kv_blocks_used == 0);
  const Run h = run_one(sched, hit);
  CHECK(h.text == hit_cold);
}

TEST_CASE("a cancel ends a restore whose reads are stuck, though the engine has nothing else to step") {
  TempDir dir;
  Fixture f("gemma3");
  const std::vector<int32_t> prompt = random_prompt(300, 19);
  warm_to_disk(f, prompt, dir);
  const GenerationRequest stream = greedy(random_prompt(40, 20), -1);
  const GenerationRequest hit = prefix_plus(prompt, 17);
  const auto gate = std::make_shared<GatedFileOps>();
  const std::unique_ptr<Scheduler> created = gated_scheduler(f, dir, gate);
  Scheduler& sched = *created;
  // A restore admitted beside a running stream reads on the reader threads; then the stream
  // is cancelled, and the engine sleeps with only the restoring sequence.
  gate->shut();
  HeldStream held(sched, stream);
  auto hs = submit_all(sched, {hit});
  held.release();
  Collector& cs = *held.collector;
  const bool reading = gate->wait_for_reader();
  cs.handle->cancel();
  const bool stream_ended = cs.wait(std::chrono::seconds(60));
  hs[0]->handle->cancel();
  const bool ended = hs[0]->wait(std::chrono::seconds(60));  // the disk is still stuck
  const bool inline_read = gate->engine_thread_waited();
  gate->open();
  REQUIRE(reading);
  REQUIRE_FALSE(inline_read);
  REQUIRE(stream_ended);
  REQUIRE(ended);
  CHECK(cs.end.finish_reason == "cancelled");
  CHECK(hs[0]->end.finish_reason == "cancelled");
  CHECK(sched.stats().kv_blocks_used == 0);
}

TEST_CASE(
    "with q8_0 KV a prefix resumes from disk with q8_0's cold answer, and a cache of one KV type is never read as "
    "another") {
  TempDir dir;
  Fixture f("gemma3");
  const std::vector<int32_t> prompt = random_prompt(200, 13);
  warm_to_disk(f, prompt, dir, DType::Q8_0);
  const TokenBytes q8 = token_bytes(f, DType::Q8_0), f16 = token_bytes(f);
  REQUIRE(q8.all * 64 == f16.all * 34);  // 34 bytes per 32 elements against 64
  for (int32_t k : {1, 7, 12}) {
    INFO("blocks " << k);
    const GenerationRequest r = prefix_plus(prompt, k);
    auto sched = with_store(*f.model, *f.backend, *f.tok, options_kv(DType::Q8_0), dir.path());
    const Run hit = run_one(*sched, r);
    CHECK(hit.text == alone(f, r, DType::Q8_0));
    CHECK(hit.usage.cached_disk_tokens == k * kBlock);
    CHECK(hit.timings.cache_restore_bytes == kBlock * (q8.all + static_cast<uint64_t>(k - 1) * q8.global));
  }
  // The same directory with f16 KV: nothing of the q8_0 chains is a hit, and they stay for
  // a q8_0 daemon; an f16 chain written now is not read by q8_0 either.
  const GenerationRequest r = prefix_plus(prompt, 12);
  {
    auto sched = with_store(*f.model, *f.backend, *f.tok, options_kv(DType::F16), dir.path());
    const Run miss = run_one(*sched, r);
    CHECK(miss.usage.cached_tokens == 0);
    CHECK(miss.text == alone(f, r));
    REQUIRE(sched->close_cache(kHangGuard) == 0);
  }
  const std::vector<int32_t> other = random_prompt(100, 14);
  warm_to_disk(f, other, dir, DType::F16);
  auto sched = with_store(*f.model, *f.backend, *f.tok, options_kv(DType::Q8_0), dir.path());
  CHECK(run_one(*sched, r).usage.cached_disk_tokens == 12 * kBlock);
  CHECK(run_one(*sched, greedy(other, 2)).usage.cached_tokens == 0);
}
