#include "ipc/generation.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "common/duration.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth::ipc {

using json = nlohmann::json;

std::vector<ApiEvent> EventStream::feed(RequestEvent ev) {
  ApiEvent out;
  switch (ev.kind) {
    case RequestEvent::Kind::Text:
      out.kind = ApiEvent::Kind::Text;
      out.text = std::move(ev.text);
      break;
    case RequestEvent::Kind::Finished:
      out.kind = ApiEvent::Kind::Done;
      out.finish_reason = std::move(ev.finish_reason);
      out.usage = ev.usage;
      out.timings = ev.timings;
      break;
    case RequestEvent::Kind::Failed:
      out.kind = ApiEvent::Kind::Error;
      out.error = internal_error(ev.error.empty() ? "the engine failed" : ev.error);
      break;
  }
  return {std::move(out)};
}

std::variant<GenerationRequest, ApiError> build_generation(const ApiRequest& request, const Tokenizer& tokenizer,
                                                           const ChatTemplate& chat_template, int32_t n_ctx) {
  GenerationRequest gen;
  const char* param = request.chat ? "messages" : "prompt";
  if (request.chat) {
    Result<std::vector<ChatSegment>> segments = render_chat(chat_template, request.messages, true);
    if (!segments.ok()) return bad_request(segments.error().message, "messages");
    gen.prompt = tokenizer.encode_segments(*segments);
  } else {
    gen.prompt = tokenizer.encode(request.prompt, true, request.parse_special);
  }
  if (auto problem = check_prompt(gen.prompt, n_ctx))
    return bad_request(problem->message, param,
                       problem->kind == PromptProblem::Kind::TooLong ? "context_length_exceeded" : "invalid_value");
  gen.max_tokens = request.max_tokens;
  gen.sampling = request.sampling;
  gen.stop = request.stop;
  return gen;
}

std::optional<ApiError> parse_keep_alive(const json& value, std::optional<KeepAlive>* out) {
  std::optional<std::chrono::milliseconds> d;
  if (value.is_number()) {
    const double s = value.get<double>();
    if (std::isfinite(s) && std::fabs(s) < 9e15) d = std::chrono::milliseconds(std::llround(s * 1e3));
  } else if (value.is_string()) {
    d = parse_duration(value.get_ref<const std::string&>());
  }
  if (!d) {
    return bad_request(
        "keep_alive must be a number of seconds or a duration such as \"5m\", \"1h30m\" or \"-1\" (for ever)",
        "keep_alive");
  }
  *out = *d < std::chrono::milliseconds::zero() ? KeepAlive{} : KeepAlive{*d};
  return std::nullopt;
}

json timings_object(const ApiEvent& done) {
  const RequestTimings& t = done.timings;
  const RequestUsage& u = done.usage;
  return json{
      {"queue_ms", t.queue_ms},
      {"cache_restore_ms", t.cache_restore_ms},
      {"cache_restore_bytes", t.cache_restore_bytes},
      {"ttft_ms", t.ttft_ms},
      {"prefill_ms", t.prefill_ms},
      {"decode_ms", t.decode_ms},
      {"prefill_tok_s", t.prefill_tok_s},
      {"decode_tok_s", t.decode_tok_s},
      {"prefill_gops", t.prefill_gops},
      {"decode_gb_s", t.decode_gb_s},
      {"itl_ms", {{"mean", t.itl_mean_ms}, {"p50", t.itl_p50_ms}, {"p95", t.itl_p95_ms}, {"max", t.itl_max_ms}}},
      {"cached_tokens", {{"memory", u.cached_memory_tokens}, {"disk", u.cached_disk_tokens}}},
      {"prefilled_tokens", u.prefilled_tokens}};
}

std::string random_id(const std::string& prefix) {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix + std::string(24, ' ');
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t i = prefix.size(); i < s.size(); ++i) s[i] = kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return s;
}

}  // namespace hearth::ipc
