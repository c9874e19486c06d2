#include "engine/scheduler/sequence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/scheduler/draft_model.h"

namespace hearth {
namespace {

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

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
      warm_(request.warm),
      loop_(request.sampling, std::move(request.stop), tokenizer, tokens_, request.max_tokens, n_ctx - n_prompt_,
            std::move(request.grammar), request.top_logprobs, std::move(request.reasoning)),
      spec_(request.speculative && !request.warm),
      submitted_(submitted),
      work_(work) {
  cache_.scope_key = std::move(request.scope.key);
  cache_.owner = request.scope.owner;
}

Sequence::~Sequence() = default;

void Sequence::on_computed(int32_t n, Clock::time_point end) {
  const bool was_prefilling = prefilling();
  n_computed_ += n;
  if (was_prefilling && !prefilling()) prefill_end_ = end;
}

void Sequence::push_text(std::string text) {
  RequestEvent ev;
  ev.text = std::move(text);
  ev.logprobs = std::move(pending_logprobs_);
  pending_logprobs_.clear();
  handle_->push(std::move(ev));
}

double Sequence::ttft_ms() const {
  return ms(submitted_, loop_.first_token());
}

const char* Sequence::on_logits(float* logits, int32_t n_vocab, Clock::time_point now) {
  TokenLoop::Token t = loop_.next(logits, n_vocab, now);
  tokens_.push_back(t.id);
  if (t.logprob) pending_logprobs_.push_back(std::move(*t.logprob));
  if (!t.text.empty()) push_text(std::move(t.text));
  return t.finished;
}

Sequence::Verified Sequence::verify(float* rows, int32_t n_vocab, std::span<const int32_t> draft, Drafter by,
                                    double spent, Clock::time_point now) {
  Verified v;
  const size_t stride = static_cast<size_t>(n_vocab);
  for (size_t i = 0; i <= draft.size(); ++i) {
    v.finished = on_logits(rows + i * stride, n_vocab, now);
    v.n_valid = static_cast<int32_t>(i) + 1;
    if (v.finished || i == draft.size() || tokens_.back() != draft[i]) break;
  }
  // The drafts kept are the valid tokens after the pending one: each was the token drawn
  // from the row before it, so its own row was read too.
  spec_.verified(by, static_cast<int32_t>(draft.size()), v.n_valid - 1, loop_.n_generated(), spent);
  return v;
}

void Sequence::finish(const char* reason, Clock::time_point now) {
  // Tokens whose text never came out (an end-of-generation token, a stop string) keep no
  // logprobs: the answer's logprobs are those of its text.
  std::string rest = loop_.flush();
  if (!rest.empty()) push_text(std::move(rest));

  RequestEvent ev;
  ev.kind = RequestEvent::Kind::Finished;
  ev.finish_reason = reason;
  if (ev.finish_reason == "stop") ev.stop_sequence = loop_.stop_sequence();
  ev.usage.prompt_tokens = n_prompt_;
  ev.usage.completion_tokens = loop_.n_generated();
  ev.usage.cached_memory_tokens = cache_.memory_tokens;
  ev.usage.cached_disk_tokens = cache_.disk_tokens;
  ev.usage.cached_tokens = cache_.memory_tokens + cache_.disk_tokens;
  ev.usage.prefilled_tokens = std::min(n_computed_, n_prompt_) - ev.usage.cached_tokens;
  ev.usage.chunks_written = cache_.chunks_written;
  RequestTimings& t = ev.timings;
  t.queue_ms = ms(submitted_, admitted_ == Clock::time_point{} ? now : admitted_);
  t.cache_restore_ms = cache_.restore_ms;
  t.cache_restore_bytes = cache_.restore_bytes;
  if (warm_ && !prefilling()) t.ttft_ms = ms(submitted_, now);
  if (prefill_started_) {
    const Clock::time_point end = prefilling() ? now : prefill_end_;
    t.prefill_ms = ms(prefill_start_, end);
    t.prefill_tok_s = t.prefill_ms > 0 ? ev.usage.prefilled_tokens * 1000.0 / t.prefill_ms : 0;
    t.prefill_gops = t.prefill_tok_s * work_.prefill_ops / 1e9;
  }
  const int32_t n_generated = loop_.n_generated();
  if (n_generated > 0) {
    t.ttft_ms = ms(submitted_, loop_.first_token());
    t.decode_ms = ms(loop_.first_token(), loop_.last_token());
    t.decode_tok_s = t.decode_ms > 0 ? (n_generated - 1) * 1000.0 / t.decode_ms : 0;
    // The weights are read once a pass; a kept draft needed no pass of its own.
    const double passes = static_cast<double>(n_generated - 1 - spec_.accepted_total());
    t.decode_gb_s = t.decode_ms > 0 ? passes * 1000.0 / t.decode_ms * work_.decode_bytes / 1e9 : 0;
  }
  t.draft_tokens = spec_.drafted_total();
  t.accepted_tokens = spec_.accepted_total();
  const std::vector<double>& itl = loop_.itl_ms();
  if (!itl.empty()) {
    t.itl_mean_ms = std::accumulate(itl.begin(), itl.end(), 0.0) / static_cast<double>(itl.size());
    t.itl_p50_ms = percentile(itl, 0.50);
    t.itl_p95_ms = percentile(itl, 0.95);
    t.itl_max_ms = *std::max_element(itl.begin(), itl.end());
  }
  handle_->push(std::move(ev));
}

}  // namespace hearth
