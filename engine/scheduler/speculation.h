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

// Which drafter made a step's drafts: the n-gram lookup, or the draft model (draft_model.h).
enum class Drafter { Ngram, Model };

// Whether drafting pays: kept drafts each save a pass of the target; each draft row costs
// kRowCost of a one-row pass (Speculator::kRowCost), and the drafter's own work costs
// `spent` one-row passes of the target (0 for the n-gram lookup; for a draft model, its
// passes times DraftCostMeter::ratio()). All three are sums over the same verifications.
bool drafting_pays(double accepted, double drafted, double spent);

// One drafter's acceptance state for one sequence: how many drafts it asks for, and
// whether recent verifications of its drafts paid (drafting_pays). A loss pauses this
// drafter only (the other one of the sequence goes on), for longer each time; a loss that
// keeping every draft would not have turned into a win (a draft model as slow as the
// target) turns it off for the rest of the answer.
class DraftGuard {
 public:
  static constexpr int32_t kMaxDraft = 7;    // see Speculator::kMaxDraft
  static constexpr int32_t kJudgeAfter = 4;  // see Speculator::kJudgeAfter

  // How many drafts the next step may take from this drafter, at most `room`: 0 while it is
  // paused (until the answer has paused_until() tokens; `generated`: it has that many now).
  int32_t wanted(int32_t room, int32_t generated) const;
  // Its drafts were verified: `drafted` of them, the first `accepted` kept; drafting them
  // cost `spent` one-row target passes besides their rows (see drafting_pays). A draft
  // model that proposed nothing still spent its passes: drafted 0, spent > 0.
  void verified(int32_t drafted, int32_t accepted, int32_t generated, double spent = 0);

  int32_t k() const { return k_; }
  int32_t paused_until() const { return paused_until_; }
  bool off() const { return off_; }
  int64_t drafted_total() const { return drafted_total_; }
  int64_t accepted_total() const { return accepted_total_; }

 private:
  int32_t k_ = 4;              // drafts asked for: doubles after a full acceptance, else accepted + 1
  double recent_drafted_ = 0;  // decayed sums over the recent verifications
  double recent_accepted_ = 0;
  double recent_spent_ = 0;
  int32_t n_judged_ = 0;  // verifications since drafting (re)started
  int32_t paused_until_ = 0;
  int32_t pause_ = 16;  // the next pause's length (tokens), doubling while drafting loses
  bool off_ = false;
  int64_t drafted_total_ = 0, accepted_total_ = 0;
};

// A draft model's cost against the target's, both measured on this engine (one target, one
// draft model, one backend): ms of one draft-model pass over ms of a one-row target pass.
// A target step of r rows is counted as 1 + kRowCost (r - 1) one-row passes.
class DraftCostMeter {
 public:
  // A target step with no prompt tokens ran `rows` rows (decode tokens and drafts) in ms.
  void target_step(int32_t rows, double ms);
  // The draft model ran n passes in ms (a proposal with no prompt to catch up).
  void draft_passes(int32_t n, double ms);
  // 0 until both were seen (then the first verifications judge the drafts alone).
  double ratio() const;

 private:
  double target_ms_ = 0, draft_ms_ = 0;  // decayed means (ms per one-row pass, per draft pass)
};

// A sequence's speculation: the n-gram drafter and the draft model, each with its own
// DraftGuard, and the n-gram lookup's shortest match.
class Speculator {
 public:
  // Most drafts one step carries for one sequence: a pass of up to 8 rows still streams
  // the weights once (docs/scheduler.md: 4 rows cost 15 ms against 9 for one on the
  // default model; at 8 rows the output projection becomes compute-bound).
  static constexpr int32_t kMaxDraft = DraftGuard::kMaxDraft;
  static constexpr int32_t kMaxMatch = 4;  // n-gram lengths tried, longest first
  static constexpr int32_t kMinMatch = 2;
  // One draft row costs about this share of a one-row step (same figures: 6 ms for 3 extra
  // rows against 9 ms); drafting whose accepted tokens do not pay for the rows is a loss.
  static constexpr double kRowCost = 0.25;
  // Verifications seen before a drafter is judged a loss (one miss proves little).
  static constexpr int32_t kJudgeAfter = DraftGuard::kJudgeAfter;

  explicit Speculator(bool enabled = false) : enabled_(enabled) {}

  // The n-gram drafts for a sequence whose known tokens are `tokens` (the last one pending)
  // and whose answer has `generated` tokens, at most `room` of them (the step's rows left,
  // the answer's tokens left); empty while speculation is off, the n-gram drafter is paused
  // or nothing matches.
  std::vector<int32_t> draft(std::span<const int32_t> tokens, int32_t room, int32_t generated);
  // How many drafts the draft model may propose next: 0 while speculation is off or the
  // draft model is paused for this sequence.
  int32_t model_wanted(int32_t room, int32_t generated) const;
  // `by`'s drafts were verified (see DraftGuard::verified); `generated`: the answer's
  // tokens after it.
  void verified(Drafter by, int32_t drafted, int32_t accepted, int32_t generated, double spent = 0);

  bool enabled() const { return enabled_; }
  const DraftGuard& guard(Drafter by) const { return by == Drafter::Ngram ? ngram_ : model_; }
  // Both drafters together.
  int64_t drafted_total() const { return ngram_.drafted_total() + model_.drafted_total(); }
  int64_t accepted_total() const { return ngram_.accepted_total() + model_.accepted_total(); }
  int32_t n_min() const { return n_min_; }

 private:
  bool enabled_;
  DraftGuard ngram_, model_;
  int32_t n_min_ = kMinMatch;  // shortest match used: longer after an n-gram draft wholly rejected
};

}  // namespace hearth
