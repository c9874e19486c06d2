#include "ipc/metrics.h"

#include <cstdio>
#include <cstdlib>

#include "engine/scheduler/scheduler.h"

namespace hearth::ipc {

namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// Prometheus accepts Go's float syntax: the shortest %g form that reads back as v.
std::string number(double v) {
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string number(uint64_t v) {
  return std::to_string(v);
}
std::string number(int64_t v) {
  return std::to_string(v);
}

template <class T>
void sample(std::string& out, const char* name, const char* type, const char* help, T value) {
  header(out, name, type, help);
  out += name;
  out += ' ';
  out += number(value);
  out += '\n';
}

// A histogram observed in milliseconds, exposed in seconds.
void histogram_seconds(std::string& out, const char* name, const char* help, const Histogram& h) {
  header(out, name, "histogram", help);
  for (size_t i = 0; i < Histogram::kBoundsMs.size(); ++i) {
    out += name;
    out += "_bucket{le=\"" + number(Histogram::kBoundsMs[i] / 1000.0) + "\"} " + number(h.counts[i]) + "\n";
  }
  out += name;
  out += "_bucket{le=\"+Inf\"} " + number(h.count) + "\n";
  out += name;
  out += "_sum " + number(h.sum / 1000.0) + "\n";
  out += name;
  out += "_count " + number(h.count) + "\n";
}

}  // namespace

void ResponseCounters::count(int status) {
  if (status >= 0 && status < kMaxStatus) by_status_[status].fetch_add(1, std::memory_order_relaxed);
}

uint64_t ResponseCounters::get(int status) const {
  if (status < 0 || status >= kMaxStatus) return 0;
  return by_status_[status].load(std::memory_order_relaxed);
}

std::string ResponseCounters::render() const {
  std::string out;
  header(out, "hearth_requests_total", "counter", "HTTP responses sent, by status code.");
  for (int s = 0; s < kMaxStatus; ++s) {
    const uint64_t n = by_status_[s].load(std::memory_order_relaxed);
    if (n == 0) continue;
    out += "hearth_requests_total{status=\"" + std::to_string(s) + "\"} " + number(n) + "\n";
  }
  return out;
}

std::string render_metrics(const ResponseCounters& responses, const SchedulerStats* engine, int64_t open_connections) {
  std::string out = responses.render();
  sample(out, "hearth_open_connections", "gauge", "Client connections open now.", open_connections);
  sample(out, "hearth_engine_ready", "gauge", "1 once the model is loaded and the engine serves.",
         int64_t{engine != nullptr});
  if (engine == nullptr) return out;
  const SchedulerStats& s = *engine;
  sample(out, "hearth_prompt_tokens_total", "counter", "Prompt tokens of finished or running requests.",
         s.prompt_tokens_total);
  sample(out, "hearth_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens_total);
  sample(out, "hearth_cached_tokens_total", "counter", "Prompt tokens whose KV came from the prompt cache.",
         s.cached_tokens_total);
  sample(out, "hearth_cancelled_total", "counter", "Requests ended by cancellation (client disconnects included).",
         s.cancelled_total);
  sample(out, "hearth_steps_total", "counter", "Forward passes run by the engine.", s.steps_total);
  sample(out, "hearth_queue_depth", "gauge", "Requests waiting for a free sequence.", s.queue_depth);
  sample(out, "hearth_running_sequences", "gauge", "Sequences admitted (prefilling or decoding).", s.running);
  sample(out, "hearth_kv_blocks_used", "gauge", "KV cache blocks in use.", s.kv_blocks_used);
  sample(out, "hearth_kv_blocks_free", "gauge", "KV cache blocks free.", s.kv_blocks_total - s.kv_blocks_used);
  histogram_seconds(out, "hearth_ttft_seconds", "Time to first token in seconds, from submission (queueing included).",
                    s.ttft_ms);
  histogram_seconds(out, "hearth_itl_seconds", "Inter-token latency in seconds (gap between consecutive tokens).",
                    s.itl_ms);
  return out;
}

}  // namespace hearth::ipc
