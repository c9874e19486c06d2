#include "engine/scheduler/generate.h"

#include <chrono>
#include <numeric>

#include "engine/scheduler/token_loop.h"

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
  const int32_t n_vocab = ctx.model().config().n_vocab;
  if (auto problem = check_prompt(prompt, ctx.n_ctx() - ctx.n_past(), n_vocab)) return make_error(problem->message);
  if (Status s = options.sampling.validate(); !s) return s.error();

  GenerateResult result;
  GenerateTimings& t = result.timings;
  t.prompt_tokens = static_cast<int32_t>(prompt.size());
  const Clock::time_point start = Clock::now();
  if (Status s = ctx.eval(prompt); !s) return s.error();
  t.prefill_ms = ms_since(start);
  result.finish_reason = "length";
  if (options.max_tokens == 0) return result;

  TokenLoop loop(options.sampling, options.stop, tok, prompt, options.max_tokens, ctx.n_ctx() - ctx.n_past());
  std::vector<float> logits;
  for (;;) {
    std::span<const float> row = ctx.logits_row(0);
    logits.assign(row.begin(), row.end());
    TokenLoop::Token token = loop.next(logits.data(), n_vocab, Clock::now());
    result.tokens.push_back(token.id);
    if (loop.n_generated() == 1) t.ttft_ms = ms_since(start);
    result.text += token.text;
    if (!token.text.empty() && on_text && !on_text(token.text)) break;  // cancelled
    if (token.finished) {
      result.finish_reason = token.finished;
      break;
    }
    const int32_t next[1] = {token.id};
    if (Status s = ctx.eval(next); !s) return s.error();
  }
  const std::string rest = loop.flush();
  result.text += rest;
  if (!rest.empty() && on_text) on_text(rest);
  t.generated_tokens = loop.n_generated();
  t.itl_ms = loop.itl_ms();
  t.decode_ms = std::chrono::duration<double, std::milli>(loop.last_token() - loop.first_token()).count();
  return result;
}

}  // namespace hearth
