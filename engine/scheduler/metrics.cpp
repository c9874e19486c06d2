#include "engine/scheduler/metrics.h"

#include <algorithm>

namespace hearth {

void EngineMetrics::queue_depth(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.queue_depth = n;
}

void EngineMetrics::admitted(uint64_t prompt_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.prompt_tokens_total += prompt_tokens;
}

void EngineMetrics::cancelled(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.cancelled_total += n;
}

void EngineMetrics::cache_lookup(const SeqCacheState& st, bool looked_on_disk) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cache_.memory_lookups;
  if (st.memory_tokens > 0) ++cache_.memory_hits;
  cache_.memory_hit_tokens += static_cast<uint64_t>(st.memory_tokens);
  if (looked_on_disk) ++cache_.disk_lookups;
  cache_.disk_hit_tokens += static_cast<uint64_t>(st.disk_tokens);
}

void EngineMetrics::memory_hit_tokens(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.memory_hit_tokens += n;
}

void EngineMetrics::step(double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.steps_total;
  stats_.step_ms.observe(ms);
}

void EngineMetrics::tokens(const Sequence& s, int32_t n_generated_before, size_t n_itl_before, StepDrafts drafts) {
  const auto drafted = static_cast<uint64_t>(drafts.drafted), accepted = static_cast<uint64_t>(drafts.accepted);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.generated_tokens_total += static_cast<uint64_t>(s.n_generated() - n_generated_before);
  stats_.draft_tokens_total += drafted;
  stats_.accepted_tokens_total += accepted;
  const bool model = drafts.by == Drafter::Model;
  (model ? stats_.model_draft_tokens_total : stats_.ngram_draft_tokens_total) += drafted;
  (model ? stats_.model_accepted_tokens_total : stats_.ngram_accepted_tokens_total) += accepted;
  if (n_generated_before == 0 && s.n_generated() > 0) stats_.ttft_ms.observe(s.ttft_ms());
  for (size_t i = n_itl_before; i < s.itl_ms().size(); ++i) stats_.itl_ms.observe(s.itl_ms()[i]);
}

void EngineMetrics::retired(const Sequence& s, int64_t n_running, const BlockPool& pool) {
  const SeqCacheState& c = s.cache();
  const int32_t cached = c.memory_tokens + c.disk_tokens;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.running = n_running;
  stats_.kv_blocks_used = pool.n_used();
  stats_.kv_blocks_cached = pool.n_cached();
  stats_.cached_tokens_total += static_cast<uint64_t>(cached);
  cache_.prefilled_tokens += static_cast<uint64_t>(std::max(0, std::min(s.n_computed(), s.n_prompt()) - cached));
}

void EngineMetrics::pool(const BlockPool& pool, int64_t kv_token_bytes, uint64_t capacity_bytes, int64_t n_running) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.memory_blocks = pool.n_named();
  cache_.memory_tokens = pool.named_tokens();
  cache_.memory_bytes = static_cast<uint64_t>(pool.named_tokens() * kv_token_bytes);
  cache_.memory_capacity_bytes = capacity_bytes;
  cache_.memory_evictions = pool.evictions();
  cache_.owners.clear();
  for (const auto& [uid, u] : pool.owners()) {
    OwnerCacheUsage& o = cache_.owners[uid];
    o.memory_blocks = u.blocks;
    o.memory_tokens = u.tokens;
    o.memory_bytes = static_cast<uint64_t>(u.tokens * kv_token_bytes);
  }
  stats_.running = n_running;
  stats_.kv_blocks_used = pool.n_used();
  stats_.kv_blocks_total = pool.n_total();
  stats_.kv_blocks_cached = pool.n_cached();
}

SchedulerStats EngineMetrics::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CacheStats EngineMetrics::cache() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_;
}

}  // namespace hearth
