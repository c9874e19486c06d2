// The engine service: one engine thread owns the model's KV block pool and runs the step
// loop — admit queued requests, build one batch that carries the next token of every
// running sequence plus a bounded chunk of prompt tokens, run the forward pass, sample,
// stream text back. A long prompt is prefilled over several steps, sized so that a step
// carrying decode tokens fits a time budget: running streams keep flowing while it is
// read (docs/scheduler.md walks through an example).
//
// Thread-safety: submit(), stop_accepting(), cancel_all(), in_flight() and stats() may be
// called from any thread. The model, the backend and the tokenizer's decoding are used by
// the engine thread only (Tokenizer::encode is const and may run on other threads).
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/model/model.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/step_budget.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/chunk_store.h"

namespace hearth {

class DraftModel;

struct SchedulerOptions {
  int32_t n_parallel = 4;  // sequences running at once
  int32_t n_ctx = 4096;    // tokens per sequence (prompt + generated)
  // Prompt tokens per step, all sequences together; 0: a whole prompt per step. Measured on
  // the default model (CPU, 2 threads) while a 2830-token prompt was admitted next to a
  // running stream: the stream's largest gap was 165 ms at 64, 316 ms at 128, 612 ms at
  // 256 and 5.3 s without chunking, and the prompt took 5.96 / 5.33 / 5.60 / 5.31 s. 128
  // keeps the stream moving for no measurable prefill cost; 64 costs ~10%.
  // With a step budget it is an upper bound: the most prompt tokens one step reads.
  int32_t prefill_chunk = 128;
  // Target duration (ms) of a step that carries decode tokens, i.e. of the gap a running
  // stream sees while prompts are read: the prompt share of such a step is sized from
  // costs learned online (step_budget.h). 0: no budget, prefill_chunk tokens every step.
  // Steps with no decode token read prefill_chunk tokens: no stream waits on them.
  double step_budget_ms = 100;
  // Time source of every timing and of the learned costs; null: the steady clock. Tests
  // inject a fake clock.
  std::shared_ptr<StepClock> clock;
  int32_t queue_max = 64;     // requests waiting for a free sequence; more get QueueFull
  int32_t block_tokens = 16;  // KV block size (tokens)
  DType kv_type = DType::F16;
  // The prompt cache. Memory: hashed KV blocks of finished sequences stay in the pool
  // until their memory is needed. Disk: the chunk store handed to create() (none: no
  // disk tier).
  bool prefix_cache = true;
  std::string model_fingerprint;  // seeds the hash chain; required for the disk tier
  // Seeds the hash chain too (see kNumericsVersion); tests set an older one to stand for a
  // cache written by an older hearth.
  uint32_t numerics_version = kNumericsVersion;
  // Speculative decoding (speculation.h): decoding sequences carry drafts from their own
  // text (n-gram prompt lookup) in steps that read no prompt tokens; a request may opt out.
  // Answers are the same bits either way. Off: one token per sequence and step.
  enum class Speculative { Off, Ngram };
  Speculative speculative = Speculative::Ngram;
  // A smaller model with the same tokenizer (draft_model.h) that drafts for a sequence when
  // the n-gram lookup finds nothing; used unless speculative is Off. Null: n-gram only. It
  // runs on the engine thread and outlives the Scheduler (the options hold it).
  std::shared_ptr<const DraftModel> draft_model;
  // A draft-model pass's cost in one-row passes of the target, which its drafts must pay
  // for (DraftGuard); < 0: measured on this engine (DraftCostMeter). Tests set it to be
  // independent of the machine's speed.
  double draft_cost_ratio = -1;
};

enum class SubmitStatus { Accepted, QueueFull, ShuttingDown, Invalid };

struct Submitted {
  SubmitStatus status = SubmitStatus::Accepted;
  std::string message;                    // why, when not Accepted
  std::shared_ptr<RequestHandle> handle;  // set when Accepted
};

// Cumulative histogram in Prometheus's sense: counts[i] = observations <= bounds[i].
struct Histogram {
  static constexpr std::array<double, 14> kBoundsMs = {1,   2.5, 5,    10,   25,   50,    100,
                                                       250, 500, 1000, 2500, 5000, 10000, 30000};
  std::array<uint64_t, kBoundsMs.size()> counts{};
  uint64_t count = 0;  // all observations (the +Inf bucket)
  double sum = 0;
  void observe(double v);
};

// A snapshot of the engine's counters and gauges.
struct SchedulerStats {
  int64_t queue_depth = 0;  // requests waiting
  int64_t running = 0;      // sequences admitted (prefilling or decoding)
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  // Blocks no sequence holds that keep a cached prefix's KV for reuse (counted in the
  // free ones too: allocate() may take them).
  int64_t kv_blocks_cached = 0;
  uint64_t prompt_tokens_total = 0;  // prompt tokens of finished or running requests
  uint64_t generated_tokens_total = 0;
  uint64_t cached_tokens_total = 0;
  uint64_t cancelled_total = 0;  // requests ended by cancel (disconnects included)
  uint64_t steps_total = 0;      // forward passes
  // Speculative decoding: drafts verified, and those kept (tokens that needed no pass).
  uint64_t draft_tokens_total = 0;
  uint64_t accepted_tokens_total = 0;
  // The same, by drafter (together the totals above).
  uint64_t ngram_draft_tokens_total = 0, ngram_accepted_tokens_total = 0;
  uint64_t model_draft_tokens_total = 0, model_accepted_tokens_total = 0;
  Histogram ttft_ms, itl_ms;
  Histogram step_ms;  // achieved duration of each forward pass
};

// One owner's (uid's) share of the prompt cache: the blocks and chunks its requests named.
struct OwnerCacheUsage {
  int64_t memory_blocks = 0;
  int64_t memory_tokens = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_entries = 0;  // chunk files of the loaded model
  uint64_t disk_bytes = 0;
};

// The prompt cache as the engine sees it (GET /api/cache).
struct CacheStats {
  // The loaded model's KV: its type, and what one token of it takes (K and V, every layer)
  // in the memory tier and in the disk tier's chunk files (payload, plus each file's
  // header and token ids spread over its tokens).
  std::string kv_type;
  uint64_t kv_bytes_per_token_memory = 0;
  double kv_bytes_per_token_disk = 0;  // 0 without a disk tier
  // Memory tier: KV blocks named by their hash chain, in use or kept for reuse.
  int64_t memory_blocks = 0;  // hashed blocks held (used by a sequence or cached)
  int64_t memory_tokens = 0;
  uint64_t memory_bytes = 0;           // memory_tokens * KV bytes per token
  uint64_t memory_capacity_bytes = 0;  // the whole KV pool
  uint64_t memory_lookups = 0;         // prompts looked up
  uint64_t memory_hits = 0;            // ... that attached at least one block
  uint64_t memory_hit_tokens = 0;      // tokens attached from memory
  uint64_t memory_evictions = 0;       // cached blocks reused for new tokens
  // Disk tier.
  bool disk_enabled = false;
  std::string disk_dir;
  uint64_t disk_lookups = 0;      // prompts that looked on disk after memory
  uint64_t disk_hit_tokens = 0;   // tokens restored from disk
  storage::StoreStats disk;       // zeros when the disk tier is off
  uint64_t prefilled_tokens = 0;  // prompt tokens computed (not from either tier)
  std::string model_fingerprint;
  std::map<uint32_t, OwnerCacheUsage> owners;  // by uid (CacheScope::owner)
};

// The bytes of the KV cache a scheduler with options o allocates for model c: n_ctx
// tokens per sequence in every full-attention layer, and in the sliding-window layers a
// window per sequence and per step (engine/kv/block_pool.h), unless that is no smaller.
uint64_t kv_pool_bytes(const ModelConfig& c, const SchedulerOptions& o);

class Scheduler {
 public:
  // Allocates the KV block pool (n_parallel * n_ctx tokens) and the activations of one
  // step, and starts the engine thread. model, backend and tokenizer outlive the Scheduler.
  // store: the disk tier (kv_store.h), which the Scheduler owns from now on; its format
  // must be the model's KV in options.kv_type for options.model_fingerprint.
  static Result<std::unique_ptr<Scheduler>> create(const Model& model, Backend& backend, const Tokenizer& tokenizer,
                                                   const SchedulerOptions& options,
                                                   std::unique_ptr<storage::ChunkStore> store = nullptr);
  // Cancels whatever is left and joins the engine thread.
  ~Scheduler();

  // Queues a request. Invalid (with a message naming the field) when the prompt is empty,
  // has an id outside the vocabulary, or does not leave room for one token in n_ctx, or
  // when the sampling parameters are out of range; QueueFull when queue_max requests wait;
  // ShuttingDown after stop_accepting(). on_event is handed to the RequestHandle.
  Submitted submit(GenerationRequest request, std::function<void()> on_event);

  // Refuse new requests from now on; queued and running ones continue.
  void stop_accepting();
  // Cancel every queued and running request (each gets finish_reason "cancelled").
  void cancel_all();
  // Requests queued or running.
  int64_t in_flight() const;
  SchedulerStats stats() const;
  const SchedulerOptions& options() const;

  CacheStats cache_stats() const;
  // Forgets cached prefixes: every hashed block no running sequence uses, and the disk
  // tier's chunk files of this model (or of every model); with `owner`, only the blocks and
  // chunks that owner's requests named. Runs on the engine thread between steps; returns
  // once done.
  Status clear_cache(bool all_models, std::optional<uint32_t> owner = std::nullopt);
  // Shutdown: writes the chunks still queued for the disk tier, giving up only when the
  // writer finishes nothing for `timeout`, and stops writing. Returns the chunks left unwritten.
  size_t close_cache(std::chrono::milliseconds timeout);

  class Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
