// What the scheduler counts for /metrics, /api/cache and `hearth status`: request and
// token totals, the TTFT, ITL and step-duration histograms, and the prompt cache's
// counters and memory gauges. The engine thread records; any thread reads a snapshot.
//
// Thread-safety: every method may be called from any thread (one mutex inside; it is
// never held while calling out, so it may be taken under the scheduler's own lock).
#pragma once

#include <cstdint>
#include <mutex>

#include "engine/kv/block_pool.h"
#include "engine/scheduler/scheduler.h"
#include "engine/scheduler/sequence.h"

namespace hearth {

// A step's drafts for one sequence: `drafted` of them verified, `accepted` kept.
struct StepDrafts {
  Drafter by = Drafter::Ngram;
  int32_t drafted = 0;
  int32_t accepted = 0;
};

class EngineMetrics {
 public:
  void queue_depth(int64_t n);
  // A request left the queue for a sequence.
  void admitted(uint64_t prompt_tokens);
  void cancelled(uint64_t n);
  // A new sequence's prompt was looked up in the cache (and on disk after memory).
  void cache_lookup(const SeqCacheState& st, bool looked_on_disk);
  // Prompt tokens attached from memory while prefilling (another sequence computed them).
  void memory_hit_tokens(uint64_t n);
  // A forward pass took ms.
  void step(double ms);
  // s generated tokens in a step: those past n_generated_before, with the gaps from
  // n_itl_before on, and verified `drafts`.
  void tokens(const Sequence& s, int32_t n_generated_before, size_t n_itl_before, StepDrafts drafts = {});
  // s ended and its blocks went back to pool; n_running sequences remain.
  void retired(const Sequence& s, int64_t n_running, const BlockPool& pool);
  // The pool's gauges (kv_token_bytes: K and V of one token in the pool's blocks;
  // capacity_bytes: the whole KV cache, companions included).
  void pool(const BlockPool& pool, int64_t kv_token_bytes, uint64_t capacity_bytes, int64_t n_running);

  SchedulerStats stats() const;
  // The engine's part of CacheStats (the disk tier's part comes from the store).
  CacheStats cache() const;

 private:
  mutable std::mutex mutex_;
  SchedulerStats stats_;
  CacheStats cache_;
};

}  // namespace hearth
