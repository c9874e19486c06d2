#include "engine/scheduler/sequence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hearth {
namespace {

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Nearest-rank percentile of an unsorted sample (copied), q in [0, 1].
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace

Sequence::Sequence(GenerationRequest request, std::shared_ptr<RequestHandle> handle, const Tokenizer& tokenizer,
                   int32_t n_ctx, Clock::time_point submitted, TokenWork work)
    : handle_(std::move(handle)),
      tokenizer_(tokenizer),
      tokens_(std::move(request.prompt)),
      n_prompt_(static_cast<int32_t>(tokens_.size())),
      n_ctx_(n_ctx),
      warm_(request.warm),
      sampler_(request.sampling),
      stop_(std::move(request.stop), tokenizer.eog_ids()),
      submitted_(submitted),
      work_(work) {
  const int32_t room = n_ctx - n_prompt_;
  max_tokens_ = request.max_tokens < 0 ? room : std::min(request.max_tokens, room);
  cache_.scope_key = std::move(request.scope.key);
  cache_.owner = request.scope.owner;
  for (int32_t t : tokens_) sampler_.accept(t);  // penalties see the prompt, as in llama.cpp
}

void Sequence::on_computed(int32_t n, Clock::time_point end) {
  const bool was_prefilling = prefilling();
  n_computed_ += n;
  if (was_prefilling && !prefilling()) prefill_end_ = end;
}

void Sequence::push_text(std::string text) {
  RequestEvent ev;
  ev.text = std::move(text);
  handle_->push(std::move(ev));
}

double Sequence::ttft_ms() const { return ms(submitted_, first_token_); }

const char* Sequence::on_logits(float* logits, int32_t n_vocab, Clock::time_point now) {
  const int32_t id = sampler_.sample(logits, n_vocab);
  sampler_.accept(id);
  tokens_.push_back(id);
  if (n_generated_ == 0) {
    first_token_ = now;
  } else {
    itl_ms_.push_back(ms(last_token_, now));
  }
  last_token_ = now;
  ++n_generated_;

  StopMatcher::Step step = stop_.feed_token(id, tokenizer_.token_bytes(id));
  if (!step.text.empty()) push_text(std::move(step.text));
  if (step.stopped) return "stop";
  if (n_generated_ >= max_tokens_ || static_cast<int32_t>(tokens_.size()) >= n_ctx_) return "length";
  return nullptr;
}

void Sequence::finish(const char* reason, Clock::time_point now) {
  std::string rest = stop_.flush();
  if (!rest.empty()) push_text(std::move(rest));

  RequestEvent ev;
  ev.kind = RequestEvent::Kind::Finished;
  ev.finish_reason = reason;
  ev.usage.prompt_tokens = n_prompt_;
  ev.usage.completion_tokens = n_generated_;
  ev.usage.cached_memory_tokens = cache_.memory_tokens;
  ev.usage.cached_disk_tokens = cache_.disk_tokens;
  ev.usage.cached_tokens = cache_.memory_tokens + cache_.disk_tokens;
  ev.usage.prefilled_tokens = std::min(n_computed_, n_prompt_) - ev.usage.cached_tokens;
  ev.usage.chunks_written = cache_.chunks_written;
  RequestTimings& t = ev.timings;
  t.queue_ms = ms(submitted_, admitted_ == Clock::time_point{} ? now : admitted_);
  t.cache_restore_ms = cache_.restore_ms;
  if (warm_ && !prefilling()) t.ttft_ms = ms(submitted_, now);
  if (prefill_started_) {
    const Clock::time_point end = prefilling() ? now : prefill_end_;
    t.prefill_ms = ms(prefill_start_, end);
    t.prefill_tok_s = t.prefill_ms > 0 ? ev.usage.prefilled_tokens * 1000.0 / t.prefill_ms : 0;
    t.prefill_gops = t.prefill_tok_s * work_.prefill_ops / 1e9;
  }
  if (n_generated_ > 0) {
    t.ttft_ms = ms(submitted_, first_token_);
    t.decode_ms = ms(first_token_, last_token_);
    t.decode_tok_s = t.decode_ms > 0 ? (n_generated_ - 1) * 1000.0 / t.decode_ms : 0;
    t.decode_gb_s = t.decode_tok_s * work_.decode_bytes / 1e9;
  }
  if (!itl_ms_.empty()) {
    t.itl_mean_ms = std::accumulate(itl_ms_.begin(), itl_ms_.end(), 0.0) / static_cast<double>(itl_ms_.size());
    t.itl_p50_ms = percentile(itl_ms_, 0.50);
    t.itl_p95_ms = percentile(itl_ms_, 0.95);
    t.itl_max_ms = *std::max_element(itl_ms_.begin(), itl_ms_.end());
  }
  handle_->push(std::move(ev));
}

}  // namespace hearth
