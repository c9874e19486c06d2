#include "ipc/metrics.h"

#include <cstdio>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// One sample of a labelled family: name{label="value"} v.
template <class T>
void labelled(std::string& out, const char* name, const char* label, const char* value, T v) {
  out += name;
  out += '{';
  out += label;
  out += "=\"";
  out += value;
  out += "\"} ";
  out += number(v);
  out += '\n';
}

// The speculative decoding totals by drafter: the n-gram lookup and the draft model.
void drafter_metrics(std::string& out, const SchedulerStats& s) {
  const char* drafted = "hearth_draft_tokens_by_drafter_total";
  header(out, drafted, "counter", "Speculative decoding: tokens drafted and verified, by drafter.");
  labelled(out, drafted, "drafter", "ngram", s.ngram_draft_tokens_total);
  labelled(out, drafted, "drafter", "model", s.model_draft_tokens_total);
  const char* accepted = "hearth_accepted_tokens_by_drafter_total";
  header(out, accepted, "counter", "Speculative decoding: drafted tokens kept, by drafter.");
  labelled(out, accepted, "drafter", "ngram", s.ngram_accepted_tokens_total);
  labelled(out, accepted, "drafter", "model", s.model_accepted_tokens_total);
}

// Memory and disk tiers of one family.
template <class T>
void tiers(std::string& out, const char* name, const char* type, const char* help, T memory, T disk) {
  header(out, name, type, help);
  labelled(out, name, "tier", "memory", memory);
  labelled(out, name, "tier", "disk", disk);
}

// The prompt cache (CacheStats). Disk hits and misses count chunks loaded; memory hits
// count prompts that attached at least one cached block.
void cache_metrics(std::string& out, const CacheStats& c) {
  const storage::StoreStats& d = c.disk;
  tiers(out, "hearth_cache_lookups_total", "counter",
        "Prompts looked up in the prompt cache, by tier (disk: after memory, for the rest of the prompt).",
        c.memory_lookups, c.disk_lookups);
  tiers(out, "hearth_cache_hits_total", "counter",
        "Prompt cache hits: memory, prompts that attached cached blocks; disk, chunks loaded and verified.",
        c.memory_hits, d.hits);
  header(out, "hearth_cache_misses_total", "counter",
         "Chunk loads from disk that found nothing valid (absent, vanished or corrupted).");
  labelled(out, "hearth_cache_misses_total", "tier", "disk", d.misses);
  tiers(out, "hearth_cache_hit_tokens_total", "counter", "Prompt tokens served from the prompt cache, by tier.",
        c.memory_hit_tokens, c.disk_hit_tokens);
  sample(out, "hearth_cache_prefilled_tokens_total", "counter", "Prompt tokens computed (served by neither tier).",
         c.prefilled_tokens);
  sample(out, "hearth_cache_restored_bytes_total", "counter", "KV bytes restored from chunk files.", d.restored_bytes);
  sample(out, "hearth_cache_written_bytes_total", "counter", "KV bytes written to chunk files.", d.written_bytes);
  sample(out, "hearth_cache_written_chunks_total", "counter", "Chunk files written.", d.written_chunks);
  tiers(out, "hearth_cache_evictions_total", "counter",
        "Cached entries evicted: memory, blocks reused for new tokens; disk, chunk files deleted for the budget.",
        c.memory_evictions, d.evictions);
  sample(out, "hearth_cache_checksum_failures_total", "counter",
         "Chunk files found corrupted, truncated or foreign (deleted; their tokens were prefilled).",
         d.checksum_failures);
  sample(out, "hearth_cache_dropped_writes_total", "counter",
         "Chunks not written: the writer's queue was full or writing had stopped.", d.dropped_writes);
  sample(out, "hearth_cache_write_errors_total", "counter", "Chunk writes that failed.", d.write_errors);
  tiers(out, "hearth_cache_bytes", "gauge",
        "Bytes the prompt cache holds: memory, cached KV blocks; disk, chunk files.", c.memory_bytes, d.bytes);
  sample(out, "hearth_cache_entries", "gauge", "Chunk files on disk (all models).", d.entries);
  sample(out, "hearth_cache_budget_bytes", "gauge", "Byte budget of the chunk files on disk.", d.budget);
  sample(out, "hearth_cache_writing", "gauge", "1 while chunks are being persisted to disk; 0 when off or stopped.",
         int64_t{c.disk_enabled && d.writing});
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
  sample(out, "hearth_write_timeouts_total", "counter",
         "Responses cut off because the client read nothing of them for the write timeout (its request cancelled).",
         write_timeouts());
  return out;
}

namespace {

// The C library's heap: bytes handed out and not yet freed, and bytes it holds free (freed
// but kept for reuse, not returned to the kernel). Resident memory alone cannot tell a leak
// from a freed peak that the allocator keeps (a restore's chunk buffers, tens of MiB, come
// and go with the load); the split can. glibc only; nothing elsewhere.
void heap_metrics(std::string& out) {
#if defined(__GLIBC__)
  const struct mallinfo2 m = mallinfo2();
  sample(out, "hearth_heap_in_use_bytes", "gauge",
         "Heap bytes allocated and not freed (malloc's arenas and its mmap'd blocks).",
         static_cast<uint64_t>(m.uordblks + m.hblkhd));
  sample(out, "hearth_heap_free_bytes", "gauge",
         "Heap bytes freed but kept by malloc for reuse, not returned to the kernel.",
         static_cast<uint64_t>(m.fordblks));
#else
  (void)out;
#endif
}

// "value" with Prometheus' label escaping (backslash, double quote, newline).
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

template <class F>
void per_model(std::string& out, const std::vector<ModelSeries>& models, const char* name, const char* type,
               const char* help, bool loaded_only, F value) {
  header(out, name, type, help);
  for (const ModelSeries& m : models) {
    if (loaded_only && !m.stats) continue;
    out += name;
    out += "{model=\"" + label_value(m.id) + "\"} " + number(value(m)) + "\n";
  }
}

}  // namespace

std::string render_model_metrics(const std::vector<ModelSeries>& models) {
  std::string out;
  per_model(out, models, "hearth_model_loaded", "gauge", "1 while the model is loaded.", false,
            [](const ModelSeries& m) { return int64_t{m.loaded}; });
  per_model(out, models, "hearth_model_memory_bytes", "gauge",
            "Bytes the loaded model is charged against --memory-budget (weights and KV pool).", false,
            [](const ModelSeries& m) { return m.memory_bytes; });
  per_model(out, models, "hearth_model_requests_in_flight", "gauge", "Requests queued or running on the model.", false,
            [](const ModelSeries& m) { return m.in_flight; });
  per_model(out, models, "hearth_model_loads_total", "counter", "Times the model was loaded.", false,
            [](const ModelSeries& m) { return m.loads; });
  per_model(out, models, "hearth_model_prompt_tokens_total", "counter",
            "Prompt tokens of the model's requests since it was loaded.", true,
            [](const ModelSeries& m) { return m.stats->prompt_tokens_total; });
  per_model(out, models, "hearth_model_generated_tokens_total", "counter",
            "Tokens the model generated since it was loaded.", true,
            [](const ModelSeries& m) { return m.stats->generated_tokens_total; });
  per_model(out, models, "hearth_model_cached_tokens_total", "counter",
            "Prompt tokens of the model whose KV came from the prompt cache, since it was loaded.", true,
            [](const ModelSeries& m) { return m.stats->cached_tokens_total; });
  per_model(out, models, "hearth_model_steps_total", "counter", "Forward passes of the model's engine.", true,
            [](const ModelSeries& m) { return m.stats->steps_total; });
  per_model(out, models, "hearth_model_kv_blocks_used", "gauge", "KV cache blocks of the model in use.", true,
            [](const ModelSeries& m) { return m.stats->kv_blocks_used; });
  per_model(out, models, "hearth_model_kv_blocks_total", "gauge", "KV cache blocks in the model's pool.", true,
            [](const ModelSeries& m) { return m.stats->kv_blocks_total; });
  return out;
}

std::string render_metrics(const ResponseCounters& responses, const SchedulerStats* engine, const CacheStats* cache,
                           int64_t open_connections) {
  std::string out = responses.render();
  sample(out, "hearth_open_connections", "gauge", "Client connections open now.", open_connections);
  heap_metrics(out);
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
  sample(out, "hearth_draft_tokens_total", "counter",
         "Speculative decoding: tokens drafted and verified in a forward pass.", s.draft_tokens_total);
  sample(out, "hearth_accepted_tokens_total", "counter",
         "Speculative decoding: drafted tokens kept (each needed no forward pass of its own).",
         s.accepted_tokens_total);
  drafter_metrics(out, s);
  sample(out, "hearth_queue_depth", "gauge", "Requests waiting for a free sequence.", s.queue_depth);
  sample(out, "hearth_running_sequences", "gauge", "Sequences admitted (prefilling or decoding).", s.running);
  sample(out, "hearth_kv_blocks_used", "gauge", "KV cache blocks in use.", s.kv_blocks_used);
  sample(out, "hearth_kv_blocks_free", "gauge", "KV cache blocks free (cached ones included).",
         s.kv_blocks_total - s.kv_blocks_used);
  sample(out, "hearth_kv_blocks_cached", "gauge",
         "KV cache blocks no sequence holds that keep a cached prefix for reuse (part of the free ones).",
         s.kv_blocks_cached);
  sample(out, "hearth_kv_blocks_total", "gauge", "KV cache blocks in the pool.", s.kv_blocks_total);
  histogram_seconds(out, "hearth_ttft_seconds", "Time to first token in seconds, from submission (queueing included).",
                    s.ttft_ms);
  histogram_seconds(out, "hearth_itl_seconds", "Inter-token latency in seconds (gap between consecutive tokens).",
                    s.itl_ms);
  histogram_seconds(out, "hearth_step_seconds",
                    "Duration of the engine's steps (one forward pass each) in seconds; a step that carries decode "
                    "tokens aims at --step-budget-ms.",
                    s.step_ms);
  if (cache != nullptr) cache_metrics(out, *cache);
  return out;
}

}  // namespace hearth::ipc
