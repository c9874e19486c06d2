// Speculative decoding with drafts from the sequence's own text (prompt lookup). A decoding
// sequence's step may carry, after its pending token, up to k tokens guessed by matching
// its last n tokens against everything it has seen (prompt and answer) and proposing what
// followed there. The pass computes logits for every row; the sequence samples them in
// order with its ordinary TokenLoop and keeps going while the token it draws is the next
// draft. The tokens kept are exactly those a step-by-step run draws (a chunk's row gives
// bitwise the logits of a step of its own, tests/engine/batch_test.cpp, and the sampler
// draws only for tokens it keeps), so greedy and seeded answers do not change; only the
// number of forward passes does. docs/scheduler.md has the details and figures.
//
// Thread-safety: engine thread only (one Speculator per sequence).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_pool.h"

namespace hearth {

// Up to k tokens that followed the latest earlier occurrence of the last n tokens of
// `tokens`, trying n from n_max down to n_min (longer matches predict better); empty when
// none of them occurs earlier. The continuation may run into the matched tail itself.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int32_t n_min, int32_t n_max, int32_t k);

// Drafts a sequence whose pending token sits at position `pending` can carry without taking
// a block a run without drafts would not take now: the room left in its table's blocks,
// plus whole blocks the pool holds unused (taking a cached block would evict a prefix that
// the run without drafts keeps).
int32_t draft_room(const BlockTable& table, const BlockPool& pool, int32_t pending);
// After verification: the blocks past the first n_valid positions (which held only rejected
// drafts' KV) go back to the pool, so the table is the one a run without drafts has.
void drop_unverified(BlockTable& table, BlockPool& pool, int32_t n_valid);

class Speculator {
 public:
  // Most drafts one step carries for one sequence: a pass of up to 8 rows still streams
  // the weights once (docs/scheduler.md: 4 rows cost 15 ms against 9 for one on the
  // default model; at 8 rows the output projection becomes compute-bound).
  static constexpr int32_t kMaxDraft = 7;
  static constexpr int32_t kMaxMatch = 4;  // n-gram lengths tried, longest first
  static constexpr int32_t kMinMatch = 2;
  // One draft row costs about this share of a one-row step (same figures: 6 ms for 3 extra
  // rows against 9 ms); drafting whose accepted tokens do not pay for the rows is a loss.
  static constexpr double kRowCost = 0.25;
  // Verifications seen before drafting is judged a loss (one miss proves little).
  static constexpr int32_t kJudgeAfter = 4;

  explicit Speculator(bool enabled = false) : enabled_(enabled) {}

  // The drafts for a sequence whose known tokens are `tokens` (the last one pending), at
  // most `room` of them (the step's rows left, the answer's tokens left); empty while
  // drafting is off or paused for this sequence or nothing matches.
  std::vector<int32_t> draft(std::span<const int32_t> tokens, int32_t room);
  // How many drafts the next step may carry from any drafter (a draft model's too): 0 while
  // drafting is off or paused, else k within `room`.
  int32_t wanted(int32_t room) const;
  // A step verified `drafted` drafts and kept the first `accepted` of them; `generated`:
  // the sequence's generated tokens after it.
  void verified(int32_t drafted, int32_t accepted, int32_t generated);

  bool enabled() const { return enabled_; }
  int64_t drafted_total() const { return drafted_total_; }
  int64_t accepted_total() const { return accepted_total_; }
  int32_t k() const { return k_; }
  int32_t n_min() const { return n_min_; }
  // Drafting resumes once the answer has this many tokens (a pause after a loss).
  int32_t paused_until() const { return paused_until_; }

 private:
  bool enabled_;
  int32_t k_ = 4;              // drafts asked for: doubles after a full acceptance, else accepted + 1
  int32_t n_min_ = kMinMatch;  // shortest match used: longer after a draft wholly rejected
  double recent_drafted_ = 0;  // decayed sums over the recent verifications
  double recent_accepted_ = 0;
  int32_t n_judged_ = 0;   // verifications since drafting (re)started
  int32_t generated_ = 0;  // the answer's tokens at the last verification
  int32_t paused_until_ = 0;
  int32_t pause_ = 16;  // the next pause's length (tokens), doubling while drafting loses
  int64_t drafted_total_ = 0, accepted_total_ = 0;
};

}  // namespace hearth
