// One admitted request inside the scheduler: its tokens (prompt, then generated), how
// many of them already have KV in the cache, its blocks, its sampler and stop matcher,
// and the clock readings its timings come from. The scheduler decides what runs; a
// Sequence turns one row of logits into a token, text events and, eventually, the end.
//
// Thread-safety: engine thread only (the RequestHandle it holds is thread-safe).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/model/token_work.h"
#include "engine/scheduler/prefix_cache.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/speculation.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth {

class DraftState;
using Clock = std::chrono::steady_clock;

class Sequence {
 public:
  // work: the model's cost of a token, for the achieved GOP/s and GB/s in the timings.
  Sequence(GenerationRequest request, std::shared_ptr<RequestHandle> handle, const Tokenizer& tokenizer, int32_t n_ctx,
           Clock::time_point submitted, TokenWork work = {});
  ~Sequence();

  RequestHandle& handle() { return *handle_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_prompt() const { return n_prompt_; }
  int32_t n_computed() const { return n_computed_; }
  int32_t n_generated() const { return loop_.n_generated(); }
  // Tokens known but not yet run through the model (the rest of the prompt, or the
  // last sampled token).
  int32_t n_pending() const { return static_cast<int32_t>(tokens_.size()) - n_computed_; }
  bool prefilling() const { return n_computed_ < n_prompt_; }
  BlockTable& table() { return table_; }
  SeqCacheState& cache() { return cache_; }
  const SeqCacheState& cache() const { return cache_; }
  bool warm() const { return warm_; }
  // Tokens whose KV may come from the prompt cache: the whole prompt for a warm request,
  // else all but the last prompt token (its logits give the first token).
  int32_t cacheable() const { return warm_ ? n_prompt_ : n_prompt_ - 1; }
  // The first n prompt tokens' KV came from the cache (at admission, or later at a block
  // boundary while prefilling); they count as computed.
  void on_cached(int32_t n_computed) { n_computed_ = n_computed; }

  // Clock readings the scheduler reports.
  void on_admitted(Clock::time_point t) { admitted_ = t; }
  void on_prefill_chunk(Clock::time_point start) {
    if (!prefill_started_) prefill_start_ = start, prefill_started_ = true;
  }
  // n tokens were run through the model at the end of a step (time `end`).
  void on_computed(int32_t n, Clock::time_point end);

  // Samples the next token from the logits of the last pending token (modified in
  // place, see TokenLoop) and streams its text. Returns why the sequence is over ("stop", "length"),
  // or nullptr while it goes on; the caller then frees its blocks and calls finish().
  const char* on_logits(float* logits, int32_t n_vocab, Clock::time_point now);

  // Verification of a step that ran the pending token and then `draft`: rows[i] are the
  // logits after the chunk's i-th token ([draft.size() + 1][n_vocab], modified in place).
  // Samples them in order as on_logits() does and stops at the first token that is not the
  // next draft, or at the end of the answer. n_valid: the chunk's tokens whose KV holds (the
  // pending one and the drafts kept); finished as for on_logits(). `by` made the drafts,
  // spending `spent` one-row target passes of its own (Speculator::verified).
  struct Verified {
    int32_t n_valid = 0;
    const char* finished = nullptr;
  };
  Verified verify(float* rows, int32_t n_vocab, std::span<const int32_t> draft, Drafter by, double spent,
                  Clock::time_point now);
  Speculator& speculator() { return spec_; }
  // The sequence's KV on the draft model (draft_model.h), made at its first proposal and
  // freed with the sequence; null without a draft model.
  std::unique_ptr<DraftState>& draft_state() { return draft_state_; }
  // Generated tokens this answer may still have.
  int32_t n_left() const { return loop_.max_tokens() - loop_.n_generated(); }

  // Ends the stream: the stop matcher's held-back text, then Finished with usage and
  // timings. reason: "stop", "length", "cancelled" or "warmed".
  void finish(const char* reason, Clock::time_point now);

  // Inter-token gaps (ms) observed so far; the scheduler feeds its histogram.
  const std::vector<double>& itl_ms() const { return loop_.itl_ms(); }
  double ttft_ms() const;

 private:
  void push_text(std::string text);

  std::shared_ptr<RequestHandle> handle_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> tokens_;
  int32_t n_prompt_ = 0;
  int32_t n_computed_ = 0;
  BlockTable table_;
  SeqCacheState cache_;
  bool warm_ = false;
  TokenLoop loop_;
  Speculator spec_;
  std::unique_ptr<DraftState> draft_state_;
  // Logprobs of tokens whose text is still held back (a UTF-8 character or a possible stop
  // string not yet whole): they go with the text that releases it.
  std::vector<TokenLogprob> pending_logprobs_;

  Clock::time_point submitted_, admitted_, prefill_start_, prefill_end_;
  bool prefill_started_ = false;
  TokenWork work_;
};

}  // namespace hearth
