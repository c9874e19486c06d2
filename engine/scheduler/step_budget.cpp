#include "engine/scheduler/step_budget.h"

#include <algorithm>
#include <cmath>

namespace hearth {

namespace {

class SteadyStepClock final : public StepClock {
 public:
  Clock::time_point now() const override { return Clock::now(); }
};

}  // namespace

std::shared_ptr<StepClock> steady_step_clock() {
  return std::make_shared<SteadyStepClock>();
}

void DecayingFit::add(double x, double y) {
  w_ = w_ * decay_ + 1;
  sx_ = sx_ * decay_ + x;
  sy_ = sy_ * decay_ + y;
  sxx_ = sxx_ * decay_ + x * x;
  sxy_ = sxy_ * decay_ + x * y;
}

double DecayingFit::predict(double x, bool through_origin) const {
  if (w_ == 0) return 0;
  const double mx = sx_ / w_, my = sy_ / w_;
  const double var = sxx_ / w_ - mx * mx;
  // The x seen differ by less than 1% of their size: no slope can be told from noise.
  const double spread = 0.01 * (std::abs(mx) + 1);
  double y;
  if (var > spread * spread) {
    const double slope = std::max(0.0, (sxy_ / w_ - mx * my) / var);
    y = my + slope * (x - mx);
  } else {
    y = through_origin && mx > 0 ? my * x / mx : my;
  }
  return std::max(0.0, y);
}

void StepCostModel::observe(const StepShape& s, double ms) {
  if (ms < 0) return;
  if (s.n_prefill == 0) {
    if (s.n_decode > 0) decode_.add(s.n_decode, ms);
    return;
  }
  if (s.n_decode == 0 && s.n_prefill >= kAloneMinTokens)
    alone_.add(s.prefill_pos, ms / static_cast<double>(s.n_prefill));
  // What the prompt tokens added to the step. Before any decode-only step was seen the
  // whole step is charged to them: an overestimate, which keeps the next steps short.
  const double per_token = ms / static_cast<double>(s.n_prefill);
  double marginal = (ms - decode_ms(s.n_decode)) / static_cast<double>(s.n_prefill);
  // A noisy step (another program took the cores) can make the decode part look as long
  // as the whole step; a prompt token still costs something.
  marginal = std::max(marginal, 0.1 * per_token);
  prefill_.add(s.prefill_pos, marginal);
}

double StepCostModel::decode_ms(int32_t n_decode) const {
  if (n_decode <= 0) return 0;
  // With one sequence count seen so far, scale by the count: more sequences never cost
  // less, and overestimating only shortens the prompt share.
  return decode_.predict(n_decode, /*through_origin=*/true);
}

double StepCostModel::prefill_ms_per_token(double pos) const {
  return prefill_.predict(pos, false);
}

double StepCostModel::alone_ms_per_token(double pos) const {
  return alone_.predict(pos, false);
}

double StepCostModel::ttft_floor(double budget_ms, double decode, double first, double p) const {
  if (alone_.empty() || decode <= 0) return 0;
  const double pa = alone_ms_per_token(first);
  const double stretched = kMaxStretch * kPlannedShare * budget_ms;
  const double longest = decode < stretched ? stretched : kSlowStretch * decode;
  const double cap = std::floor((longest - decode) / p);
  if (pa <= 0 || cap <= 0) return 0;
  const double slack = 3 * pa - 2 * p;  // n·slack >= 2·decode keeps 2/3 of the speed alone
  if (slack <= 0) return cap;
  return std::min(cap, std::ceil(2 * decode / slack));
}

int64_t StepCostModel::prefill_tokens(double budget_ms, int32_t n_decode, double first, int64_t upper) const {
  if (upper <= 0) return 0;
  if (prefill_.empty()) return std::min(kProbeTokens, upper);
  const double p0 = prefill_ms_per_token(first);
  if (p0 <= 0) return upper;
  const double decode = decode_ms(n_decode);
  const double floor =
      std::max({1.0, std::floor(kMinPrefillPerDecode * decode / p0), ttft_floor(budget_ms, decode, first, p0)});
  const double left = kPlannedShare * budget_ms - decode;
  if (left <= floor * p0) return std::min(static_cast<int64_t>(floor), upper);
  // n tokens from `first` on cost n · p(first + n/2), p growing with the position: two
  // rounds of n = left / p(first + n/2) from n = 0 settle within a token or two, erring
  // low (the second round prices n at the larger first-round n).
  double n = 0;
  for (int round = 0; round < 2; ++round) {
    const double p = prefill_ms_per_token(first + n / 2);
    if (p <= 0) return upper;
    n = left / p;
    if (n >= static_cast<double>(upper)) return upper;
  }
  return std::min(static_cast<int64_t>(std::max(n, floor)), upper);
}

}  // namespace hearth
