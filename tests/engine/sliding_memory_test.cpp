// Sliding-window layers bounded in memory (engine/kv/block_pool.h): their KV lives in
// companion blocks of a smaller pool, held for the window of each sequence's end and kept
// with named blocks only while the room is not needed. On the synthetic gemma3 (five of six
// layers with a 4-token window): the pool's companion rules; long generations beside each
// other equal the single-sequence reference, whose context keeps every layer whole; and a
// cached prompt whose window's companions were reused by other prompts reads that KV from
// disk (or computes it without a disk tier) and gives the cold answer.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/kv/block_pool.h"
#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

TEST_CASE("block pool companions: held by tables, cached with named blocks, reused least recently released first") {
  BlockPool pool(6, 2, 2);
  REQUIRE(pool.bounded_sliding());
  BlockTable t;
  REQUIRE(t.reserve(pool, 4));  // two blocks, each with a companion
  CHECK(pool.n_sliding_free() == 0);
  const int32_t b0 = t.blocks()[0], b1 = t.blocks()[1];
  CHECK(pool.companion(b0) >= 0);
  CHECK(t.sliding_slots()[1] == pool.companion(b0) * 2 + 1);
  CHECK(t.sliding_slots()[2] == pool.companion(b1) * 2);
  // A third block needs a third companion: none is free or cached.
  CHECK_FALSE(t.reserve(pool, 6));
  CHECK(t.capacity() == 4);
  // Block 0 names its tokens and leaves the window: its companion stays with it, cached.
  const std::vector<int32_t> a{5, 6}, b{7, 8};
  REQUIRE(pool.name_full(b0, 100, 1, a));
  t.slide(pool, 1);
  CHECK(t.sliding_slots()[0] == 0);
  CHECK_FALSE(t.has_sliding(0));
  CHECK(pool.companion(b0) >= 0);
  CHECK_FALSE(pool.sliding_missing(b0));
  CHECK(pool.n_sliding_free() == 1);
  // Another table attaching block 0 holds its companion again.
  BlockTable u;
  pool.attach(b0);
  u.append(pool, b0);
  CHECK(u.has_sliding(0));
  CHECK(pool.n_sliding_free() == 0);
  u.release(pool);
  // The third block takes block 0's companion: block 0 lacks its sliding-window KV now,
  // and best_child passes it over.
  REQUIRE(t.reserve(pool, 6));
  CHECK(pool.sliding_evictions() == 1);
  CHECK(pool.sliding_missing(b0));
  CHECK(pool.best_child(1, a).first == -1);
  // An unnamed block's companion is freed when its table lets go.
  t.slide(pool, 2);
  CHECK(pool.companion(b1) < 0);
  CHECK(pool.n_sliding_free() == 1);
  // add_sliding gives block 0 a fresh companion, to be written from disk; a discarded one
  // (the write failed) does not stay with the named block.
  REQUIRE(t.add_sliding(pool, 0));
  CHECK(t.has_sliding(0));
  t.drop_sliding(pool, 0, true);
  CHECK(pool.sliding_missing(b0));
  t.release(pool);
  CHECK(pool.n_used() == 0);
  CHECK(pool.n_sliding_free() == 2);
}

TEST_CASE("sequences beside each other hold a window of their sliding-window layers and answer as alone") {
  Fixture f("gemma3");
  SchedulerOptions so = options();
  so.n_parallel = 3;
  // The companions: far fewer than the blocks, so sequences reuse them as they go.
  const uint64_t bounded = kv_pool_bytes(f.model->config(), so);
  const ModelConfig& c = f.model->config();
  const uint64_t whole = 2 * row_bytes(so.kv_type, c.kv_dim()) * static_cast<uint64_t>(c.n_layer) *
                         static_cast<uint64_t>(so.n_parallel * so.n_ctx);
  CHECK(bounded < whole / 2);
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
  std::vector<GenerationRequest> reqs;
  for (uint32_t i = 0; i < 3; ++i)
    reqs.push_back(greedy(random_prompt(150 + 40 * static_cast<int32_t>(i), 40 + i), 70));
  std::vector<std::string> cold;
  for (const GenerationRequest& r : reqs) cold.push_back(alone(f, r));
  const auto cs = submit_all(*sched, reqs);
  for (size_t i = 0; i < cs.size(); ++i) {
    INFO("request " << i);
    REQUIRE(cs[i]->wait());
    CHECK(cs[i]->text == cold[i]);
  }
  CHECK(sched->cache_stats().memory_capacity_bytes == bounded);
}

TEST_CASE("a cached prompt whose window's companions went to other prompts reads them from disk, or computes them") {
  Fixture f("gemma3");
  SchedulerOptions so = options("fp-a");
  so.n_parallel = 1;
  so.n_ctx = 2048;  // room for every prompt's blocks, but companions for a few windows only
  const GenerationRequest a = greedy(random_prompt(100, 50), 4);
  const std::string cold = alone(f, a);
  for (const bool disk : {true, false}) {
    INFO((disk ? "with" : "without") << " a disk tier");
    TempDir dir;
    auto sched = disk ? with_store(*f.model, *f.backend, *f.tok, so, dir.path())
                      : std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
    const Run first = run_one(*sched, a);
    CHECK(first.text == cold);
    // The writer has its chunks on disk before anything needs them (it runs on its own
    // thread, which a busy machine may hold back).
    for (const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
         sched->cache_stats().disk.written_chunks < static_cast<uint64_t>(first.usage.chunks_written) &&
         std::chrono::steady_clock::now() < deadline;)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(sched->cache_stats().disk.written_chunks == static_cast<uint64_t>(first.usage.chunks_written));
    const Run hit = run_one(*sched, a);  // a whole memory hit while its companions stay
    CHECK(hit.text == cold);
    CHECK(hit.usage.cached_memory_tokens == 99);
    CHECK(hit.timings.cache_restore_bytes == 0);
    for (uint32_t i = 0; i < 3; ++i) CHECK(run_one(*sched, greedy(random_prompt(100, 60 + i), 4)).text.size() > 0);
    const Run again = run_one(*sched, a);
    CHECK(again.text == cold);
    if (disk) {
      // The full blocks from memory, the last one's sliding-window KV from its chunk file
      // (the partial block's tail on disk holds the first answer's tokens too, which this
      // prompt does not continue with).
      CHECK(again.usage.cached_memory_tokens == 96);
      CHECK(again.usage.cached_disk_tokens == 0);
      CHECK(again.timings.cache_restore_bytes == 16 * 2 * row_bytes(so.kv_type, f.model->config().kv_dim()) *
                                                     static_cast<uint64_t>(f.model->config().n_layer));
    } else {
      // No block can end the prefix: each one's window lacks that KV. (At most the first
      // token is copied from another prompt's first block, which starts with BOS too.)
      CHECK(again.usage.prefilled_tokens >= 99);
    }
  }
}
