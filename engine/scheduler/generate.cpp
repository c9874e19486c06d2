#include "engine/scheduler/generate.h"

#include <chrono>
#include <numeric>

#include "engine/sampling/sampler.h"
#include "engine/sampling/stop.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

double GenerateTimings::decode_tok_s() const {
  // The first token comes from prefill; decode throughput counts the tokens after it.
  return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1000.0 / decode_ms : 0;
}

double GenerateTimings::itl_ms_mean() const {
  return itl_ms.empty() ? 0 : std::accumulate(itl_ms.begin(), itl_ms.end(), 0.0) / itl_ms.size();
}

Result<GenerateResult> generate(InferenceContext& ctx, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                const GenerateOptions& options, const TextCallback& on_text) {
  if (prompt.empty()) return make_error("generate: the prompt is empty");
  if (Status s = options.sampling.validate(); !s) return s.error();
  const int32_t n_vocab = ctx.model().config().n_vocab;

  GenerateResult result;
  GenerateTimings& t = result.timings;
  t.prompt_tokens = static_cast<int32_t>(prompt.size());
  const Clock::time_point start = Clock::now();
  if (Status s = ctx.eval(prompt); !s) return s.error();
  t.prefill_ms = ms_since(start);

  Sampler sampler(options.sampling);
  for (int32_t id : prompt) sampler.accept(id);  // penalties see the prompt, as in the daemon and llama.cpp's server
  StopMatcher stop(options.stop, tok.eog_ids());
  std::vector<float> logits;
  Clock::time_point first_token_at, last_token_at;
  result.finish_reason = "length";

  auto emit = [&](const std::string& text) {
    if (text.empty()) return true;
    result.text += text;
    return on_text ? on_text(text) : true;
  };

  for (int32_t i = 0; i < options.max_tokens; ++i) {
    std::span<const float> row = ctx.logits_row(0);
    logits.assign(row.begin(), row.end());
    const int32_t id = sampler.sample(logits.data(), n_vocab);
    sampler.accept(id);
    result.tokens.push_back(id);
    const Clock::time_point now = Clock::now();
    if (i == 0) {
      first_token_at = now;
      t.ttft_ms = ms_since(start);
    } else {
      t.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last_token_at).count());
    }
    last_token_at = now;
    ++t.generated_tokens;

    StopMatcher::Step step = stop.feed_token(id, tok.token_bytes(id));
    if (!emit(step.text)) break;
    if (step.stopped) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == options.max_tokens) break;
    if (ctx.n_past() >= ctx.n_ctx()) break;  // context full: stop with "length"
    const int32_t next[1] = {id};
    if (Status s = ctx.eval(next); !s) return s.error();
  }
  emit(stop.flush());
  if (t.generated_tokens > 0) t.decode_ms = std::chrono::duration<double, std::milli>(last_token_at - first_token_at).count();
  return result;
}

}  // namespace hearth
