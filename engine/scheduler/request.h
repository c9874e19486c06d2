// One generation request as the engine sees it, and the channel its results travel back
// on. The socket side (ipc) builds a GenerationRequest from validated input, submits it to
// the Scheduler and reads RequestEvents from the RequestHandle; the engine thread pushes
// them. Nothing here knows about HTTP.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/sampling/params.h"
#include "engine/scheduler/reasoning_budget.h"

namespace hearth {

class CompiledGrammar;  // engine/sampling/grammar.h

// Whose prompt cache a request may use. The scope roots the prefix hash chain (memory
// blocks, chunk files, index rows), so KV is reused only between requests whose scopes are
// equal: a request of another scope finds nothing, as if nothing were cached. ipc fills
// it from the connection's peer (docs/security.md); in-process callers leave it empty.
struct CacheScope {
  // "" (unscoped: the model's own chain), or e.g. "uid:1000", "gid:100", "tcp", "shared",
  // each optionally followed by "\nsalt:<cache_salt>". Never logged (a salt is a secret).
  std::string key;
  // The uid charged with the entries this request creates (GET/DELETE /api/cache by
  // owner); kTcpOwner for the TCP listener's single identity.
  uint32_t owner = 0;
};
inline constexpr uint32_t kTcpOwner = 0xfffffffeu;  // (uid_t)-2: no real user has it

// A generated token's log-probability in the distribution it was drawn from (after the
// penalties and the grammar's mask, before temperature and truncation), and the most likely
// tokens of that distribution.
struct TokenLogprob {
  struct Alternative {
    int32_t token = 0;
    std::string bytes;  // the token's text as bytes (may be part of a UTF-8 character)
    float logprob = 0.0f;
  };
  int32_t token = 0;
  std::string bytes;
  float logprob = 0.0f;
  std::vector<Alternative> top;  // best first; as many as the request's top_logprobs
};

struct GenerationRequest {
  std::vector<int32_t> prompt;    // token ids (BOS included): 1 .. n_ctx - 1 of them
  int32_t max_tokens = -1;        // generated tokens at most; < 0: until the context is full
  SamplingParams sampling;        // validated by submit()
  std::vector<std::string> stop;  // stop strings (not part of the returned text)
  // Prefill (or restore) the prompt and persist its full chunks, generating nothing: a
  // client warms a system prompt once. Ends with finish_reason "warmed".
  bool warm = false;
  CacheScope scope;
  // Log-probabilities of each generated token with this many alternatives (0..20), in the
  // Text events; -1: none.
  int32_t top_logprobs = -1;
  // The grammar the generated tokens must follow (a JSON Schema, tool calls); null: free.
  std::shared_ptr<const CompiledGrammar> grammar;
  // A thinking model's reasoning, bounded (reasoning_budget.h); default: not bounded.
  ReasoningLimit reasoning;
  // Speculative decoding (speculation.h) may serve this request when the engine has it on;
  // false opts out. The answer is the same either way.
  bool speculative = true;
};

struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;         // prompt tokens whose KV came from the prompt cache
  int32_t cached_memory_tokens = 0;  // ... of which attached from blocks in memory
  int32_t cached_disk_tokens = 0;    // ... of which restored from chunk files on disk
  int32_t prefilled_tokens = 0;      // prompt tokens computed (prompt - cached)
  int32_t chunks_written = 0;        // chunks this request handed to the disk writer
};

// Milliseconds measured on the engine's clock. ttft_ms counts from submit() (queueing
// included) to the first token's text being ready; prefill_ms from the first prefill
// chunk's start to the prompt's last chunk's end (interleaved decode steps of other
// sequences included: it is what this request waited for).
struct RequestTimings {
  double queue_ms = 0;
  double cache_restore_ms = 0;       // looking up and restoring cached KV (memory and disk)
  uint64_t cache_restore_bytes = 0;  // KV bytes read back from the disk tier's chunk files
  double ttft_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;      // first token to the last
  double prefill_tok_s = 0;  // prefilled (not cached) prompt tokens / prefill time
  double decode_tok_s = 0;   // (completion_tokens - 1) / decode time
  double prefill_gops = 0;   // prefill_tok_s × the layers' multiply-adds per token ×2 (10^9 op/s)
  double decode_gb_s = 0;    // decode_tok_s × weight bytes read per step (10^9 B/s)
  double itl_mean_ms = 0, itl_p50_ms = 0, itl_p95_ms = 0;  // gaps between consecutive tokens
  double itl_max_ms = 0;                                   // the longest gap
  // Speculative decoding: tokens drafted and verified in a pass, and those of them kept
  // (each kept one is a token that needed no pass of its own).
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
};

struct RequestEvent {
  enum class Kind { Text, Finished, Failed };
  Kind kind = Kind::Text;
  std::string text;                    // Text: a piece of valid UTF-8, in order
  std::vector<TokenLogprob> logprobs;  // Text: the tokens whose text this is (top_logprobs >= 0)
  std::string finish_reason;           // Finished: "stop", "length" or "cancelled"
  std::string stop_sequence;           // Finished "stop": the stop string that ended it; else ""
  RequestUsage usage;                  // Finished
  RequestTimings timings;              // Finished
  std::string error;                   // Failed: what went wrong (an engine error; a 500)
};

// Shared by the connection that submitted a request (the consumer) and the engine thread
// (the producer). Every member is thread-safe. Exactly one Finished or Failed event ends
// the stream; no events follow it.
class RequestHandle {
 public:
  // on_cancel (optional) runs on the first cancel(), on the cancelling thread: the engine's
  // wake-up, so that a cancel is seen even while the engine sleeps (for instance while its
  // only running sequence waits for a restore's reads).
  explicit RequestHandle(std::function<void()> on_event, std::function<void()> on_cancel = {})
      : on_event_(std::move(on_event)), on_cancel_(std::move(on_cancel)) {}

  // Any thread: the engine drops the sequence at its next step, frees its KV and ends the
  // stream with finish_reason "cancelled".
  void cancel() {
    if (!cancelled_.exchange(true, std::memory_order_relaxed) && on_cancel_) on_cancel_();
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Consumer: moves out the events pushed so far, oldest first.
  std::vector<RequestEvent> take_events() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<RequestEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

  // Producer: appends an event, then calls on_event (on the engine thread; it must not
  // block — the ipc side posts a wake-up to its own executor).
  void push(RequestEvent ev) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(ev));
    }
    if (on_event_) on_event_();
  }

 private:
  std::function<void()> on_event_;
  std::function<void()> on_cancel_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::deque<RequestEvent> events_;
};

}  // namespace hearth
