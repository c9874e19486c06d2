// /metrics: Prometheus text exposition (format 0.0.4) of the server's own counters and
// the engine's SchedulerStats. Durations are exposed in seconds (Prometheus convention);
// the engine measures them in milliseconds.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler/scheduler.h"

namespace hearth::ipc {

// Responses sent, by HTTP status, and responses cut off because the client read nothing
// for the write timeout. Thread-safe.
class ResponseCounters {
 public:
  void count(int status);
  uint64_t get(int status) const;
  void count_write_timeout() { write_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t write_timeouts() const { return write_timeouts_.load(std::memory_order_relaxed); }

  // HELP/TYPE lines and one sample per status seen so far.
  std::string render() const;

 private:
  static constexpr int kMaxStatus = 600;
  std::array<std::atomic<uint64_t>, kMaxStatus> by_status_{};
  std::atomic<uint64_t> write_timeouts_{0};
};

// The whole /metrics page. engine may be null (model still loading): its metrics are then
// left out and hearth_engine_ready is 0. cache (the prompt cache, hearth_cache_*) may be
// null too; it is then left out.
std::string render_metrics(const ResponseCounters& responses, const SchedulerStats* engine, const CacheStats* cache,
                           int64_t open_connections);

// One model a daemon serves by name, for the hearth_model_* series (label model="id").
struct ModelSeries {
  std::string id;
  bool loaded = false;
  uint64_t memory_bytes = 0;  // charged to the memory budget while loaded
  int64_t in_flight = 0;
  uint64_t loads = 0;
  std::optional<SchedulerStats> stats;  // its engine's, while loaded
};

// hearth_model_loaded, _memory_bytes, _requests_in_flight, _loads_total, and while loaded
// the engine's _prompt_tokens_total, _generated_tokens_total, _cached_tokens_total,
// _steps_total, _kv_blocks_used and _kv_blocks_total, each with a model label.
std::string render_model_metrics(const std::vector<ModelSeries>& models);

}  // namespace hearth::ipc
