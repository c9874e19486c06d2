// /metrics: Prometheus text exposition (format 0.0.4) of the server's own counters and
// the engine's SchedulerStats. Durations are exposed in seconds (Prometheus convention);
// the engine measures them in milliseconds.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace hearth {
struct SchedulerStats;
struct CacheStats;
}  // namespace hearth

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

}  // namespace hearth::ipc
