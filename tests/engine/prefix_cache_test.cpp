// The prompt cache's promises, on synthetic models (gemma3's has a 4-token sliding window,
// qwen2's has Q/K/V biases, qwen3's per-head Q/K norms and wider heads):
// output with a cached prefix — attached in memory, copied from a partial block, restored
// from disk after a restart — is exactly the output computed cold; a chat's second turn
// prefills only what is new; sequences that share a prompt prefill it once; KV of another
// model is never used; the block pool reuses cached blocks tail first.
//
// The reference runs (alone()) use the same backend as the scheduler's engine thread, so
// they run while no request is in flight: a Backend serves one thread at a time.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "engine/kv/block_pool.h"
#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

TEST_CASE("block pool: named blocks are shared, cached after release and reused tail first") {
  BlockPool pool(4, 2);
  const std::vector<int32_t> a{5, 6}, b{7, 8}, partial{9};
  const int32_t b0 = pool.allocate(), b1 = pool.allocate(), b2 = pool.allocate();
  REQUIRE(pool.name_full(b0, 100, 1, a));
  REQUIRE(pool.name_full(b1, 200, 100, b));
  CHECK_FALSE(pool.name_full(b2, 100, 1, a));  // the name is taken
  pool.name_partial(b2, 200, partial);
  CHECK(pool.find(100) == b0);
  CHECK(pool.best_child(200, std::vector<int32_t>{9, 4}) == std::pair<int32_t, int32_t>{b2, 1});
  CHECK(pool.best_child(1, std::vector<int32_t>{5, 0}) == std::pair<int32_t, int32_t>{b0, 1});
  CHECK(pool.best_child(1, std::vector<int32_t>{4}).first == -1);
  // Released tail first, as a BlockTable does: b2, then b1, then b0.
  pool.release(b2), pool.release(b1), pool.release(b0);
  CHECK(pool.n_used() == 0);
  CHECK(pool.n_cached() == 3);
  CHECK(pool.n_named() == 3);
  pool.attach(b0);  // a new sequence shares the head
  CHECK(pool.refs(b0) == 1);
  // The never-used block goes first, then the least recently released: the tail.
  CHECK(pool.allocate() == 3);
  CHECK(pool.allocate() == b2);
  CHECK(pool.evictions() == 1);
  CHECK(pool.best_child(200, std::vector<int32_t>{9}).first == -1);
  CHECK(pool.find(200) == b1);
  CHECK(pool.clear_cached() == 1);  // b1; b0 is in use and keeps its name
  CHECK(pool.find(200) == -1);
  CHECK(pool.find(100) == b0);
  CHECK(pool.allocate() == b1);
  CHECK(pool.allocate() == -1);
}

TEST_CASE("block pool: an owner over an equal share loses cached blocks before another owner does") {
  BlockPool pool(6, 1);
  auto named = [&](uint64_t hash, uint32_t owner) {
    const int32_t b = pool.allocate();
    REQUIRE(b >= 0);
    REQUIRE(pool.name_full(b, hash, 0, std::vector<int32_t>{static_cast<int32_t>(hash)}, owner));
    pool.release(b);
    return b;
  };
  // Owner 1 caches two blocks first; owner 2 then fills the rest of the pool.
  const int32_t a1 = named(1, 1), a2 = named(2, 1);
  for (uint64_t h = 10; h < 14; ++h) named(h, 2);
  CHECK(pool.owners().at(2).blocks == 4);
  // Owner 2 is past an equal share (3 of 6): its own least recently released block goes,
  // though owner 1's are older.
  CHECK(pool.find(10) >= 0);
  named(14, 2);
  CHECK(pool.find(10) == -1);
  CHECK(pool.find(1) == a1);
  CHECK(pool.find(2) == a2);
  named(15, 2);
  CHECK(pool.find(11) == -1);
  CHECK(pool.find(1) == a1);
  // Within their shares, plain LRU decides: owner 1 (2 blocks) taking a third evicts owner 2's
  // oldest (4 blocks, over), then both hold 3 and the least recently released goes: owner 1's.
  named(3, 1);
  CHECK(pool.find(12) == -1);
  CHECK(pool.owners().at(1).blocks == 3);
  CHECK(pool.owners().at(2).blocks == 3);
  named(4, 1);
  CHECK(pool.find(1) == -1);
  CHECK(pool.evictions() == 4);
}

TEST_CASE("a prompt cached in memory gives the cold output and prefills only what is new") {
  for (const char* arch : {"gemma3", "llama", "qwen2", "qwen3"}) {
    INFO(arch);
    Fixture f(arch);
    auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, options()));
    const GenerationRequest r = greedy(random_prompt(150, 1), 12);
    const std::string cold = alone(f, r);
    const Run first = run_one(*sched, r);
    CHECK(first.text == cold);
    CHECK(first.usage.cached_tokens == 0);
    CHECK(first.usage.prefilled_tokens == 150);
    // The same prompt again: every token but the last comes from memory (full blocks are
    // attached, the rest of the last block is copied from the first run's partial block).
    const Run second = run_one(*sched, r);
    CHECK(second.text == cold);
    CHECK(second.usage.cached_memory_tokens == 149);
    CHECK(second.usage.prefilled_tokens == 1);
    // A prompt that diverges at token 100: 100 tokens from memory, the rest computed.
    GenerationRequest r2 = r;
    for (size_t i = 100; i < r2.prompt.size(); ++i) r2.prompt[i] = 3 + (r2.prompt[i] + 17) % 300;
    const std::string expected2 = alone(f, r2);
    const Run third = run_one(*sched, r2);
    CHECK(third.text == expected2);
    CHECK(third.usage.cached_memory_tokens == 100);
    CHECK(third.usage.prefilled_tokens == 50);
    // clear_cache forgets it all.
    REQUIRE(sched->clear_cache(false));
    CHECK(run_one(*sched, r).usage.cached_tokens == 0);
    CHECK(sched->stats().kv_blocks_used == 0);
  }
}

TEST_CASE("a prompt of another cache scope finds nothing, in memory or on disk, and gives the same output") {
  Fixture f("gemma3");
  TempDir dir;
  auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
  GenerationRequest alice = greedy(random_prompt(150, 7), 8);
  alice.scope = CacheScope{"uid:40001", 40001};
  GenerationRequest bob = alice;
  bob.scope = CacheScope{"uid:40002", 40002};
  GenerationRequest salted = alice;
  salted.scope.key += "\nsalt:x";
  const std::string cold = alone(f, alice);
  CHECK(run_one(*sched, alice).usage.cached_tokens == 0);
  const Run b = run_one(*sched, bob);
  CHECK(b.usage.cached_tokens == 0);  // not even the partial first block
  CHECK(b.text == cold);
  CHECK(run_one(*sched, salted).usage.cached_tokens == 0);
  CHECK(run_one(*sched, alice).usage.cached_memory_tokens == 149);
  const CacheStats st = sched->cache_stats();
  REQUIRE(st.owners.count(40001) == 1);
  REQUIRE(st.owners.count(40002) == 1);
  CHECK(st.owners.at(40002).memory_tokens > 0);
  // Clearing Bob's entries leaves Alice's.
  REQUIRE(sched->clear_cache(true, 40002));
  CHECK(run_one(*sched, alice).usage.cached_memory_tokens == 149);
  CHECK(run_one(*sched, bob).usage.cached_tokens == 0);
}

TEST_CASE("a chat's second turn prefills only the new message") {
  Fixture f("gemma3");
  auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, options()));
  GenerationRequest turn1 = greedy(random_prompt(90, 2), 20);
  const GenerateResult answer = alone_result(f, turn1);
  const Run r1 = run_one(*sched, turn1);
  REQUIRE(r1.text == answer.text);
  // The client re-sends the conversation: first prompt, the answer's tokens, a new message.
  GenerationRequest turn2 = turn1;
  turn2.prompt.insert(turn2.prompt.end(), answer.tokens.begin(), answer.tokens.end());
  const std::vector<int32_t> message = random_prompt(25, 3);
  turn2.prompt.insert(turn2.prompt.end(), message.begin() + 1, message.end());
  const std::string expected2 = alone(f, turn2);
  const Run r2 = run_one(*sched, turn2);
  CHECK(r2.text == expected2);
  // Only the 24 new tokens and the answer's last token (sampled, never run) are computed.
  CHECK(r2.usage.prefilled_tokens == 24 + 1);
  CHECK(r2.usage.cached_memory_tokens == 90 + static_cast<int32_t>(answer.tokens.size()) - 1);
}

TEST_CASE("eight requests sharing a long prefix prefill it once") {
  for (const char* arch : {"llama", "qwen2"}) {
    INFO(arch);
    Fixture f(arch);
    auto sched = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, options()));
    const std::vector<int32_t> system = random_prompt(200, 4);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 8; ++i) {
      GenerationRequest r = greedy(system, 6);
      const std::vector<int32_t> q = random_prompt(11, 10 + static_cast<uint32_t>(i));
      r.prompt.insert(r.prompt.end(), q.begin() + 1, q.end());
      reqs.push_back(r);
    }
    std::vector<std::string> expected;
    for (const GenerationRequest& r : reqs) expected.push_back(alone(f, r));
    const std::vector<std::unique_ptr<Collector>> cs = submit_all(*sched, reqs);
    int32_t prefilled = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
      INFO("request " << i << " of " << cs.size() << ": " << reqs[i].prompt.size() << " prompt tokens, "
                      << reqs[i].max_tokens << " to generate");
      REQUIRE(cs[i]->wait());
      CHECK(cs[i]->text == expected[i]);
      prefilled += cs[i]->end.usage.prefilled_tokens;
    }
    // One sequence computes the 200 shared tokens; each of the others computes at most its
    // own 10 plus the shared tokens of the last, partly shared block (200 = 12 * 16 + 8).
    CHECK(prefilled <= 210 + 7 * (10 + 8));
    CHECK(sched->cache_stats().prefilled_tokens == static_cast<uint64_t>(prefilled));
  }
}

TEST_CASE("warming a prompt persists it without generating, a restart restores it from disk") {
  TempDir dir;
  Fixture f("gemma3");
  const GenerationRequest r = greedy(random_prompt(300, 5), 10);
  const std::string cold = alone(f, r);
  {
    auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
    GenerationRequest warm = r;
    warm.warm = true;
    const Run w = run_one(*sched, warm);
    CHECK(w.finish_reason == "warmed");
    CHECK(w.text.empty());
    CHECK(w.usage.completion_tokens == 0);
    CHECK(w.usage.prefilled_tokens == 300);
    CHECK(w.usage.chunks_written == 19);  // 300 tokens = 18 full 16-token chunks + a 12-token tail
    // Warming again finds everything in memory.
    const Run w2 = run_one(*sched, warm);
    CHECK(w2.usage.cached_memory_tokens == 300);
    CHECK(w2.usage.chunks_written == 0);
    CHECK(sched->close_cache(kHangGuard) == 0);
    CHECK(sched->cache_stats().disk.model_entries == 19);
  }
  {
    // A new engine (memory empty) on the same directory: all but the last token from disk,
    // 11 of them from the tail chunk.
    auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
    const Run hit = run_one(*sched, r);
    CHECK(hit.text == cold);
    CHECK(hit.usage.cached_disk_tokens == 299);
    CHECK(hit.usage.prefilled_tokens == 1);
    CHECK(sched->cache_stats().disk.hits == 19);
    // What a token of KV takes, and what the restore read: 288 tokens' worth.
    const CacheStats cs = sched->cache_stats();
    const ModelConfig& c = f.model->config();
    const uint64_t per_token = 2 * static_cast<uint64_t>(c.n_layer) * row_bytes(DType::F16, c.kv_dim());
    CHECK(cs.kv_type == "f16");
    // In memory a token's KV is its full-attention layers': the sliding-window layers hold
    // a window per sequence (companions), whatever the context.
    const int n_global = c.n_layer - c.n_sliding_layers();
    CHECK(n_global < c.n_layer);
    CHECK(cs.kv_bytes_per_token_memory == 2 * static_cast<uint64_t>(n_global) * row_bytes(DType::F16, c.kv_dim()));
    CHECK(cs.kv_bytes_per_token_disk == Approx(per_token + (144.0 + 4 * 16) / 16));  // header, token ids
    // The restore read every layer of the last full chunk (the 4-token window of its end
    // lies in it) and of the tail, and only the one full-attention layer of the 17 chunks
    // before them.
    const uint64_t global_per_token = per_token / static_cast<uint64_t>(c.n_layer);
    CHECK(hit.timings.cache_restore_bytes == (16 + 12) * per_token + 272 * global_per_token);
  }
  {
    // Another model's engine (another fingerprint) on the same directory never uses them.
    Fixture other("gemma3", 2);
    const std::string other_cold = alone(other, r);
    auto sched = with_store(*other.model, *other.backend, *other.tok, options("fp-b"), dir.path());
    const Run miss = run_one(*sched, r);
    CHECK(miss.usage.cached_tokens == 0);
    CHECK(miss.text == other_cold);
  }
}

// KV computed by other kernels differs in the last bits; restoring it would break "a cached
// prompt gives the cold output". The version of the backends' arithmetic is part of the
// cache key: a cache written before a kernel change is never restored after it.
TEST_CASE("KV written by an older version of the kernels is never restored, and stays for that version") {
  TempDir dir;
  Fixture f("gemma3");
  const GenerationRequest r = greedy(random_prompt(100, 9), 6);
  const std::string cold = alone(f, r);
  SchedulerOptions older = options("fp-a");
  older.numerics_version = kNumericsVersion - 1;
  {
    auto sched = with_store(*f.model, *f.backend, *f.tok, older, dir.path());
    GenerationRequest warm = r;
    warm.warm = true;
    CHECK(run_one(*sched, warm).usage.chunks_written == 7);  // 6 chunks and a 4-token tail
    CHECK(sched->close_cache(kHangGuard) == 0);
  }
  {
    auto sched = with_store(*f.model, *f.backend, *f.tok, options("fp-a"), dir.path());
    const Run miss = run_one(*sched, r);
    CHECK(miss.usage.cached_tokens == 0);
    CHECK(miss.usage.prefilled_tokens == 100);
    CHECK(miss.text == cold);
  }
  {
    auto sched = with_store(*f.model, *f.backend, *f.tok, older, dir.path());
    CHECK(run_one(*sched, r).usage.cached_disk_tokens == 99);
  }
}

// The disk tier is opened by the scheduler's owner; a store of another model, fingerprint
// or KV type is refused at create(), so its chunks can never be read as this model's KV.
TEST_CASE("a chunk store of another fingerprint or KV type is refused by the scheduler") {
  TempDir dir;
  Fixture f("gemma3");
  const SchedulerOptions so = options("fp-a");
  auto open = [&](const std::string& fp, DType kv) {
    return std::move(*open_kv_store(f.model->config(), kv, fp, dir.path().string(), uint64_t{1} << 30));
  };
  Result<std::unique_ptr<Scheduler>> other_fp =
      Scheduler::create(*f.model, *f.backend, *f.tok, so, open("fp-b", DType::F16));
  REQUIRE_FALSE(other_fp.ok());
  CHECK(other_fp.error().message.find("format") != std::string::npos);
  CHECK_FALSE(Scheduler::create(*f.model, *f.backend, *f.tok, so, open("fp-a", DType::F32)).ok());
  SchedulerOptions unfingerprinted = so;
  unfingerprinted.model_fingerprint.clear();
  CHECK_FALSE(Scheduler::create(*f.model, *f.backend, *f.tok, unfingerprinted, open("fp-a", DType::F16)).ok());
  CHECK(Scheduler::create(*f.model, *f.backend, *f.tok, so, open("fp-a", DType::F16)).ok());
}
