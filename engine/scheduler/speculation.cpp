#include "engine/scheduler/speculation.h"

#include <algorithm>

namespace hearth {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int32_t n_min, int32_t n_max, int32_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(n_max, len - 1); n >= std::max(1, n_min); --n) {
    const std::span<const int32_t> tail = tokens.subspan(static_cast<size_t>(len - n));
    // The latest start i < len - n whose n tokens equal the tail: the most recent context
    // (the line being rewritten, the last time the answer said this) predicts best.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n, to = std::min(len, from + k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

int32_t draft_room(const BlockTable& table, const BlockPool& pool, int32_t pending) {
  const int64_t bt = pool.block_tokens();
  int64_t unused = pool.n_unused();
  if (pool.bounded_sliding()) unused = std::min<int64_t>(unused, pool.n_sliding_unused());
  // The blocks the table has, and those it has once the pending token's KV has a block.
  const int64_t have = table.capacity() / bt, need = std::max(have, (int64_t{pending} + bt) / bt);
  const int64_t spare = std::max<int64_t>(0, unused - (need - have));
  const int64_t room = (need + spare) * bt - pending - 1;
  return static_cast<int32_t>(std::clamp<int64_t>(room, 0, Speculator::kMaxDraft));
}

void drop_unverified(BlockTable& table, BlockPool& pool, int32_t n_valid) {
  const int32_t bt = pool.block_tokens();
  table.truncate(pool, static_cast<size_t>((n_valid + bt - 1) / bt));
}

bool drafting_pays(double accepted, double drafted, double spent) {
  return accepted >= Speculator::kRowCost * drafted + spent;
}

int32_t DraftGuard::wanted(int32_t room, int32_t generated) const {
  if (off_ || generated < paused_until_) return 0;
  return std::max(0, std::min({k_, room, kMaxDraft}));
}

void DraftGuard::verified(int32_t drafted, int32_t accepted, int32_t generated, double spent) {
  if (drafted <= 0 && spent <= 0) return;
  drafted_total_ += drafted;
  accepted_total_ += accepted;
  if (drafted > 0) k_ = accepted == drafted ? std::min(2 * k_, kMaxDraft) : std::max(1, accepted + 1);
  // Each verification's weight decays by 0.8: the last ~5 count most.
  recent_drafted_ = 0.8 * recent_drafted_ + drafted;
  recent_accepted_ = 0.8 * recent_accepted_ + accepted;
  recent_spent_ = 0.8 * recent_spent_ + spent;
  if (++n_judged_ < kJudgeAfter) return;  // too few verifications to judge yet
  if (drafting_pays(recent_accepted_, recent_drafted_, recent_spent_)) {
    pause_ = 16;
    return;
  }
  // A loss: stop drafting for a while, longer each time it loses again; for good when even
  // every draft kept would have lost.
  off_ = !drafting_pays(recent_drafted_, recent_drafted_, recent_spent_);
  paused_until_ = generated + pause_;
  pause_ = std::min(2 * pause_, 1024);
  recent_drafted_ = recent_accepted_ = recent_spent_ = 0;
  n_judged_ = 0;
  k_ = 1;
}

void DraftCostMeter::target_step(int32_t rows, double ms) {
  if (rows <= 0 || ms <= 0) return;
  const double one_row = ms / (1 + Speculator::kRowCost * (rows - 1));
  target_ms_ = target_ms_ > 0 ? 0.9 * target_ms_ + 0.1 * one_row : one_row;
}

void DraftCostMeter::draft_passes(int32_t n, double ms) {
  if (n <= 0 || ms < 0) return;
  const double per_pass = ms / n;
  draft_ms_ = draft_ms_ > 0 ? 0.9 * draft_ms_ + 0.1 * per_pass : per_pass;
}

double DraftCostMeter::ratio() const {
  return target_ms_ > 0 ? draft_ms_ / target_ms_ : 0;
}

std::vector<int32_t> Speculator::draft(std::span<const int32_t> tokens, int32_t room, int32_t generated) {
  const int32_t k = enabled_ ? ngram_.wanted(room, generated) : 0;
  if (k == 0) return {};
  return ngram_draft(tokens, n_min_, kMaxMatch, k);
}

int32_t Speculator::model_wanted(int32_t room, int32_t generated) const {
  return enabled_ ? model_.wanted(room, generated) : 0;
}

void Speculator::verified(Drafter by, int32_t drafted, int32_t accepted, int32_t generated, double spent) {
  if (by == Drafter::Model) return model_.verified(drafted, accepted, generated, spent);
  if (drafted > 0 && accepted == 0) n_min_ = std::min(n_min_ + 1, kMaxMatch);
  if (drafted > 0 && accepted == drafted) n_min_ = std::max(n_min_ - 1, kMinMatch);
  ngram_.verified(drafted, accepted, generated, spent);
}

}  // namespace hearth
