// Drafts from a second, smaller model that shares the target's tokenizer (SmolLM2-135M for
// SmolLM2-360M/1.7B, Qwen2.5-0.5B for a bigger Qwen2.5). Each drafting sequence has its
// own state on the draft model: a contiguous KV cache (InferenceContext) holding exactly the
// sequence's kept tokens — the prompt and the answer's verified tokens, never a draft the
// target has not verified. A proposal catches the cache up to the kept tokens, runs the
// draft model greedily for up to k tokens, stopping early where its top probability falls
// below kPMin, and forgets the drafted positions again before returning.
//
// The drafts only change which tokens the target verifies, never the answer
// (speculation.h): a wrong draft costs a row, not a token.
//
// Thread-safety: propose() and DraftState run on the engine thread only; n_states() may be
// read from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth {

class DraftModel;

// One sequence's KV on the draft model; freed with the sequence (Sequence owns it).
class DraftState {
 public:
  explicit DraftState(const DraftModel& owner);
  ~DraftState();
  DraftState(const DraftState&) = delete;
  DraftState& operator=(const DraftState&) = delete;

 private:
  friend class DraftModel;
  const DraftModel& owner_;
  std::unique_ptr<InferenceContext> ctx_;  // positions 0 .. n_past() - 1 = the first kept tokens
  bool failed_ = false;                    // an eval failed: no more drafts for this sequence
};

class DraftModel {
 public:
  // Stop drafting where the draft model's most probable next token has less than this
  // probability: an unlikely guess is likely rejected, and each guess costs a draft-model
  // step. llama.cpp's default draft p_min was 0.9 in its first common/speculative.h, later
  // 0.75; its August 2026 source has 0 (no early stop) with at most 3 drafts. Ours draft up
  // to Speculator::kMaxDraft (7), so a stop is worth keeping; 0.75 is not tuned.
  static constexpr float kPMin = 0.75f;

  // Binds `draft` (loaded on `backend`, the target's) as a drafter for `target`: refused with
  // an error naming both models unless the two tokenizers have the same vocabulary — the same
  // size and the same piece at every id, the same BOS and EOS. p_min: see kPMin (tests of
  // random-weight models, whose guesses are never that sure, pass 0).
  static Result<std::shared_ptr<DraftModel>> create(const Model& target, const Tokenizer& target_tok,
                                                    const Model& draft, const Tokenizer& draft_tok, Backend& backend,
                                                    float p_min = kPMin);

  // Up to k greedy drafts to follow `tokens` (a sequence's kept tokens, the last one pending
  // in the target); n_ctx: the most tokens the sequence holds. No drafts when k <= 0, when
  // the first guess is below p_min or ends the answer (an end-of-generation token), or after
  // a failure (logged once; drafting then stops for this sequence, the answer goes on
  // without). What it cost comes with them: the draft model's forward passes (each eval
  // call: the catch-up, then one a guess but the last) and the tokens the catch-up ran.
  struct Proposal {
    std::vector<int32_t> tokens;
    int32_t n_passes = 0;
    int32_t n_caught_up = 0;  // the whole prompt at a sequence's first proposal, then a few
  };
  Proposal propose(std::unique_ptr<DraftState>& state, std::span<const int32_t> tokens, int32_t k, int32_t n_ctx) const;

  const Model& model() const { return model_; }
  // Sequences holding KV on the draft model now (each one's cache is freed with it).
  int64_t n_states() const { return n_states_.load(); }

 private:
  DraftModel(const Model& model, Backend& backend, int32_t n_vocab_target, std::vector<int32_t> eog, float p_min)
      : model_(model), backend_(backend), n_vocab_target_(n_vocab_target), eog_(std::move(eog)), p_min_(p_min) {}
  friend class DraftState;
  // Runs what the state lacks of tokens (see the .cpp); n_run: how many tokens that was.
  Status catch_up(DraftState& st, std::span<const int32_t> tokens, int32_t n_ctx, int32_t& n_run) const;

  const Model& model_;
  Backend& backend_;
  const int32_t n_vocab_target_;    // a guess past the target's vocabulary ends the draft
  const std::vector<int32_t> eog_;  // the target's end-of-generation ids, ascending: a draft stops before one
  const float p_min_;
  mutable std::atomic<int64_t> n_states_{0};
};

// The most KV a draft model `c` holds for its target's sequences: n_parallel contexts of
// n_ctx + Speculator::kMaxDraft tokens (DraftModel::catch_up), K and V of every layer in F16
// (bytes; the contexts' activations aside). The daemon charges it to the memory budget.
uint64_t draft_kv_bytes(const ModelConfig& c, int32_t n_ctx, int32_t n_parallel);

// Whether two tokenizers are the same vocabulary (see DraftModel::create); the error names
// the first difference and both models.
Status check_same_vocab(const Tokenizer& target, const std::string& target_name, const Tokenizer& draft,
                        const std::string& draft_name);

}  // namespace hearth
