// Time-budgeted steps. A decoding stream waits one step between two tokens, so a step that
// carries decode tokens should end within a time budget (--step-budget-ms, 100 ms by
// default) however many prompt tokens wait to be read. The prompt share of a step is sized
// from costs learned online from the steps already run on this engine (one model, one
// backend): the cost of a step's decode part against the number of decoding sequences,
// and the marginal cost of one prompt token against the context it attends to.
// docs/scheduler.md walks through an example with real numbers.
//
// Thread-safety: StepCostModel is used by the engine thread only; a StepClock's now() may
// be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

namespace hearth {

using Clock = std::chrono::steady_clock;

// What one step (one forward pass) carries, as far as its cost goes.
struct StepShape {
  int32_t n_decode = 0;        // decoding sequences, one token each
  int64_t n_prefill = 0;       // prompt tokens, all prefilling sequences together
  int32_t n_prefill_seqs = 0;  // prefilling sequences with a chunk in this step
  double prefill_pos = 0;      // mean position of those prompt tokens (tokens each one attends to)
};

// The time source of the step loop: every timing the scheduler reports (TTFT, ITL, step
// durations) and the costs it learns come from it. The real one reads the steady clock;
// tests inject one whose time advances by a modelled cost of each forward pass, so the
// budget's behaviour is checked without reading a wall clock.
class StepClock {
 public:
  virtual ~StepClock() = default;
  virtual Clock::time_point now() const = 0;
  // The forward pass of a step of this shape has just run (engine thread). A fake clock
  // advances here; the steady clock does nothing.
  virtual void on_forward(const StepShape&) {}
};

// std::chrono::steady_clock as a StepClock.
std::shared_ptr<StepClock> steady_step_clock();

// Fits y ≈ a + b·x by least squares over observations whose weights decay by `decay` at
// each new one (0.9: the last ~10 count most), so the fit follows a machine whose speed
// changes (other programs, thermal limits). b is kept >= 0: every cost we fit grows with x.
class DecayingFit {
 public:
  explicit DecayingFit(double decay) : decay_(decay) {}
  void add(double x, double y);
  bool empty() const { return w_ == 0; }
  // The fitted y at x, >= 0. Until the x seen spread out, a line cannot be fitted: then
  // the weighted mean of y, or (through_origin) that mean scaled by x / mean x.
  double predict(double x, bool through_origin) const;

 private:
  double decay_;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed sums of 1, x, y, x², x·y
};

class StepCostModel {
 public:
  // When nothing is known about prompt tokens yet, a step next to decoding streams reads
  // this many of them (one 16-token KV block) to learn their cost.
  static constexpr int64_t kProbeTokens = 16;
  // Prompt tokens get at least this many times the decode part's time in a step, even
  // when that overruns the budget (many streams, a slow or busy machine): a prompt read
  // beside streams then moves at >= 2/3 of its speed alone (n·p >= 2d gives
  // n / (d + n·p) >= (2/3) / p), so its TTFT stays within 1.5x, while a stream's gap stays
  // within 3x its decode-only step. At least one token a step.
  static constexpr double kMinPrefillPerDecode = 2.0;
  // That bound holds when a prompt token costs as much in a step's small chunk as in the
  // large chunks of a prompt read alone; often it costs more (the weights' unpacking and
  // reading are shared by fewer tokens). So once steps with no stream have shown the
  // prompt's speed alone (chunks of kAloneMinTokens or more), a step beside streams also
  // reads at least the n tokens with n / (decode + n·p) >= (2/3) / p_alone (p: the
  // marginal cost learned beside streams), as long as the step's plan stays within
  // kMaxStretch times the planned share of the budget (117 ms of 100: the longest gaps
  // measured run ~25% past a plan, so a stream still waits under 150 ms). When the
  // decode part alone already overruns that (Vulkan on a software device: 470-750 ms for
  // one token of the default model), no step can meet the budget; the prompt's TTFT is
  // kept instead, in steps of at most kSlowStretch times the decode part (the prompt may
  // take 5/6 of a step: 2/3 of its speed alone holds while a token beside streams costs
  // up to 1.25x what it costs alone; 1.2x was measured there, in 7-token chunks).
  static constexpr int64_t kAloneMinTokens = 32;
  static constexpr double kMaxStretch = 1.3;
  static constexpr double kSlowStretch = 6.0;
  // Steps are planned to this share of the budget: the rest absorbs the cost model's error
  // (a new context length, another program on the cores) and the work between two steps
  // (sampling, streaming text), which a stream waits for too.
  static constexpr double kPlannedShare = 0.9;

  // A step of this shape took `ms`.
  void observe(const StepShape& shape, double ms);

  // The decode part of a step with n_decode decoding sequences (ms); 0 when none was seen.
  double decode_ms(int32_t n_decode) const;
  // Marginal cost of one prompt token at mean position pos (ms); 0 when none was seen.
  double prefill_ms_per_token(double pos) const;
  // Cost of one prompt token read with no stream beside it, in a large chunk (ms); 0 when
  // none was seen.
  double alone_ms_per_token(double pos) const;

  // Prompt tokens (all sequences together) that fit in budget_ms next to n_decode decoding
  // sequences, reading from position `first` on: at least kMinPrefillPerDecode times the
  // decode part's worth (and 1), at most upper.
  int64_t prefill_tokens(double budget_ms, int32_t n_decode, double first, int64_t upper) const;

 private:
  DecayingFit decode_{0.9};  // x: decoding sequences, y: ms of a step with no prompt tokens
  // x: mean position, y: ms per prompt token beyond the decode part. Forgets faster: the
  // position grows at every step of a long prompt, and the line must follow it.
  DecayingFit prefill_{0.8};
  DecayingFit alone_{0.8};  // x: mean position, y: ms per token of a prompt-only step

  // The tokens the TTFT bound above asks of a step (0: nothing known or nothing needed).
  double ttft_floor(double budget_ms, double decode, double first, double p) const;
};

}  // namespace hearth
