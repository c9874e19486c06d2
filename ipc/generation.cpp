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

using json = nlohmann::ordered_json;

EventStream::EventStream() = default;
EventStream::EventStream(std::vector<CallForm> forms, std::vector<std::string> names)
    : parser_(std::make_unique<ToolCallParser>(std::move(forms), std::move(names))) {}
EventStream::~EventStream() = default;
EventStream::EventStream(EventStream&&) noexcept = default;
EventStream& EventStream::operator=(EventStream&&) noexcept = default;

void EventStream::split_reasoning(bool inside) {
  reasoning_ = std::make_unique<ReasoningSplitter>(inside);
}

namespace {

bool all_space(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

void EventStream::content(std::string text, std::vector<ApiEvent>& out) {
  if (parser_ && all_space(text)) {
    held_space_ += text;
    return;
  }
  ApiEvent ev;
  ev.text = std::move(held_space_) + std::move(text);
  held_space_.clear();
  ev.logprobs = std::move(held_logprobs_);
  held_logprobs_.clear();
  out.push_back(std::move(ev));
}

void EventStream::parsed(std::vector<ToolCallParser::Event> events, std::vector<ApiEvent>& out) {
  using Kind = ToolCallParser::Event::Kind;
  for (ToolCallParser::Event& e : events) {
    if (e.kind == Kind::Content) {
      content(std::move(e.text), out);
      continue;
    }
    ApiEvent ev;
    ev.call_index = e.index;
    if (e.kind == Kind::CallBegin) {
      held_space_.clear();  // layout before a call
      if (call_ids_.size() <= static_cast<size_t>(e.index)) call_ids_.resize(static_cast<size_t>(e.index) + 1);
      call_ids_[static_cast<size_t>(e.index)] = random_id("call_");
      ev.kind = ApiEvent::Kind::CallBegin;
      ev.call_name = std::move(e.name);
    } else if (e.kind == Kind::CallArguments) {
      ev.kind = ApiEvent::Kind::CallArguments;
      ev.text = std::move(e.text);
    } else {
      ev.kind = ApiEvent::Kind::CallEnd;
      ev.text = std::move(e.text);  // "" for a whole call, else why it is broken
    }
    ev.call_id = call_ids_[static_cast<size_t>(e.index)];
    out.push_back(std::move(ev));
  }
}

void EventStream::answer(std::string text, std::vector<ApiEvent>& out) {
  if (parser_) {
    parsed(parser_->feed(text), out);
  } else {
    content(std::move(text), out);
  }
}

void EventStream::split(std::vector<ReasoningSplitter::Piece> pieces, std::vector<ApiEvent>& out) {
  for (ReasoningSplitter::Piece& p : pieces) {
    if (!p.reasoning) {
      answer(std::move(p.text), out);
      continue;
    }
    ApiEvent ev;
    ev.kind = ApiEvent::Kind::Reasoning;
    ev.text = std::move(p.text);
    ev.logprobs = std::move(held_logprobs_);
    held_logprobs_.clear();
    out.push_back(std::move(ev));
  }
}

void EventStream::text(std::string text, std::vector<TokenLogprob> logprobs, std::vector<ApiEvent>& out) {
  held_logprobs_.insert(held_logprobs_.end(), std::make_move_iterator(logprobs.begin()),
                        std::make_move_iterator(logprobs.end()));
  if (reasoning_) {
    split(reasoning_->feed(text), out);
  } else {
    answer(std::move(text), out);
  }
}

std::vector<ApiEvent> EventStream::feed(RequestEvent ev) {
  std::vector<ApiEvent> out;
  switch (ev.kind) {
    case RequestEvent::Kind::Text:
      text(std::move(ev.text), std::move(ev.logprobs), out);
      return out;
    case RequestEvent::Kind::Finished: {
      if (reasoning_) split(reasoning_->finish(), out);
      if (parser_) parsed(parser_->finish(/*cut_short=*/ev.finish_reason != "stop"), out);
      if (!held_space_.empty() && call_ids_.empty()) {  // an answer that is only whitespace
        ApiEvent space;
        space.text = std::move(held_space_);
        out.push_back(std::move(space));
      }
      ApiEvent done;
      done.kind = ApiEvent::Kind::Done;
      done.finish_reason = std::move(ev.finish_reason);
      done.stop_sequence = std::move(ev.stop_sequence);
      done.usage = ev.usage;
      done.timings = ev.timings;
      done.timings_more = timings_more_;
      out.push_back(std::move(done));
      return out;
    }
    case RequestEvent::Kind::Failed: {
      ApiEvent failed;
      failed.kind = ApiEvent::Kind::Error;
      failed.error = internal_error(ev.error.empty() ? "the engine failed" : ev.error);
      out.push_back(std::move(failed));
      return out;
    }
  }
  return out;
}

std::variant<GenerationRequest, ApiError> build_generation(const ApiRequest& request, const Tokenizer& tokenizer,
                                                           const ChatTemplate& chat_template, int32_t n_ctx) {
  GenerationRequest gen;
  const char* param = request.chat ? "messages" : "prompt";
  if (request.chat) {
    Result<std::vector<ChatSegment>> segments =
        render_chat(chat_template, request.messages, true, request.tools, request.chat_options);
    if (!segments.ok()) return bad_request(segments.error().message, request.tools.empty() ? "messages" : "tools");
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
  json out{{"queue_ms", t.queue_ms},
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
           {"prefilled_tokens", u.prefilled_tokens},
           {"draft_tokens", t.draft_tokens},
           {"accepted_tokens", t.accepted_tokens}};
  if (!done.timings_more.empty()) {
    const json more = json::parse(done.timings_more, nullptr, /*allow_exceptions=*/false);
    if (more.is_object())
      for (const auto& [key, value] : more.items()) out[key] = value;
  }
  return out;
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
