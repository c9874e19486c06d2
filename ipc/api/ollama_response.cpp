#include "ipc/api/ollama_response.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

int64_t ms_to_ns(double ms) {
  return std::isfinite(ms) && ms > 0 ? std::llround(ms * 1e6) : 0;
}

json byte_values(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

// JSON has no -inf: a token the mask ruled out reads as -9999, as on the OpenAI routes.
double finite(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

// Ollama's logprobs: [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}].
json logprobs_json(const std::vector<TokenLogprob>& tokens) {
  json out = json::array();
  for (const TokenLogprob& t : tokens) {
    json top = json::array();
    for (const TokenLogprob::Alternative& a : t.top)
      top.push_back({{"token", a.bytes}, {"logprob", finite(a.logprob)}, {"bytes", byte_values(a.bytes)}});
    out.push_back({{"token", t.bytes},
                   {"logprob", finite(t.logprob)},
                   {"bytes", byte_values(t.bytes)},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

// A call as Ollama writes it: its arguments a JSON object. Arguments that do not parse as one
// (an answer cut off by the length limit in the middle of a call) stay the text they were.
json tool_call_json(const ToolCall& call, size_t index) {
  json args = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded() || !args.is_object()) args = call.arguments;
  json fn{{"index", index}, {"name", call.name}, {"arguments", std::move(args)}};
  json j{{"function", std::move(fn)}};
  if (!call.id.empty()) j["id"] = call.id;
  return j;
}

json object_base(const OllamaMeta& meta) {
  return json{{"model", meta.model}, {"created_at", rfc3339_now()}};
}

// The text (and reasoning, and calls) of one object: message.content (chat) or response
// (generate); message.thinking or thinking when there is reasoning.
void put_text(json* j, OllamaEndpoint endpoint, const std::string& text, const std::string& thinking,
              const json& calls) {
  if (endpoint == OllamaEndpoint::Chat) {
    json message{{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) message["thinking"] = thinking;
    if (!calls.empty()) message["tool_calls"] = calls;
    (*j)["message"] = std::move(message);
  } else {
    (*j)["response"] = text;
    if (!thinking.empty()) (*j)["thinking"] = thinking;
    if (!calls.empty()) (*j)["tool_calls"] = calls;
  }
}

std::string line(const json& j) {
  return dump_json(j) + "\n";
}

// Streamed: an object per text piece and per tool call, then the final one; an engine failure
// is an error line. Whole: everything collected into the final object.
class OllamaWriter final : public ResponseWriter {
 public:
  OllamaWriter(OllamaMeta meta, bool stream) : meta_(std::move(meta)), stream_(stream) {}

  bool streamed() const override { return stream_; }
  std::string content_type() const override { return "application/x-ndjson"; }
  ErrorShape error_shape() const override { return ErrorShape::Ollama; }

  std::string write(const ApiEvent& ev) override {
    switch (ev.kind) {
      case ApiEvent::Kind::Text:
        if (stream_) return line(piece(ev.text, "", json::array(), ev.logprobs));
        text_ += ev.text;
        logprobs_.insert(logprobs_.end(), ev.logprobs.begin(), ev.logprobs.end());
        return "";
      case ApiEvent::Kind::Reasoning:
        if (stream_) return line(piece("", ev.text, json::array(), ev.logprobs));
        thinking_ += ev.text;
        logprobs_.insert(logprobs_.end(), ev.logprobs.begin(), ev.logprobs.end());
        return "";
      case ApiEvent::Kind::CallBegin:
        calls_.push_back(ToolCall{ev.call_id, ev.call_name, ""});
        return "";
      case ApiEvent::Kind::CallArguments:
        if (!calls_.empty()) calls_.back().arguments += ev.text;
        return "";
      case ApiEvent::Kind::CallEnd:
        if (!stream_ || calls_.empty()) return "";
        return line(piece("", "", json::array({tool_call_json(calls_.back(), calls_.size() - 1)}), {}));
      case ApiEvent::Kind::Done:
        if (stream_) return line(final_object(ev));
        response_ = HttpResponse{200, "application/json", dump_json(final_object(ev)), "", {}};
        return "";
      case ApiEvent::Kind::Error:
        response_ = error_response(ev.error, ErrorShape::Ollama);
        return stream_ ? line(json{{"error", ev.error.message}}) : "";
    }
    return "";
  }

  HttpResponse response() override { return response_; }

 private:
  json piece(const std::string& text, const std::string& thinking, const json& calls,
             const std::vector<TokenLogprob>& logprobs) const {
    json j = object_base(meta_);
    put_text(&j, meta_.endpoint, text, thinking, calls);
    j["done"] = false;
    if (meta_.logprobs) j["logprobs"] = logprobs_json(logprobs);
    return j;
  }

  json final_object(const ApiEvent& done) const {
    json j = object_base(meta_);
    json calls = json::array();
    if (!stream_)
      for (size_t i = 0; i < calls_.size(); ++i) calls.push_back(tool_call_json(calls_[i], i));
    put_text(&j, meta_.endpoint, stream_ ? std::string() : text_, stream_ ? std::string() : thinking_, calls);
    if (!stream_ && meta_.logprobs) j["logprobs"] = logprobs_json(logprobs_);
    const OllamaDurations d = ollama_durations(done, meta_.load_wait, std::chrono::steady_clock::now() - meta_.started);
    j["done"] = true;
    j["done_reason"] = ollama_done_reason(done.finish_reason);
    j["total_duration"] = d.total_ns;
    j["load_duration"] = d.load_ns;
    j["prompt_eval_count"] = d.prompt_eval_count;
    j["prompt_eval_duration"] = d.prompt_eval_ns;
    j["eval_count"] = d.eval_count;
    j["eval_duration"] = d.eval_ns;
    j["timings"] = timings_object(done);
    return j;
  }

  OllamaMeta meta_;
  bool stream_;
  std::string text_;                    // whole: the text so far
  std::string thinking_;                // whole: the reasoning so far
  std::vector<TokenLogprob> logprobs_;  // whole: its tokens
  std::vector<ToolCall> calls_;         // the calls so far (streamed: the last one is being written)
  HttpResponse response_;
};

}  // namespace

std::string rfc3339(std::chrono::nanoseconds since_epoch) {
  const int64_t ns = since_epoch.count();
  const int64_t secs = ns >= 0 ? ns / 1'000'000'000 : -((-ns + 999'999'999) / 1'000'000'000);
  int64_t frac = ns - secs * 1'000'000'000;
  const time_t t = static_cast<time_t>(secs);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec);
  std::string out = buf;
  if (frac != 0) {
    // Go's RFC3339Nano: the fraction without its trailing zeros.
    std::snprintf(buf, sizeof buf, ".%09lld", static_cast<long long>(frac));
    std::string f = buf;
    f.erase(f.find_last_not_of('0') + 1);
    out += f;
  }
  return out + "Z";
}

std::string rfc3339_now() {
  return rfc3339(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()));
}

OllamaDurations ollama_durations(const ApiEvent& done, std::chrono::nanoseconds load_wait,
                                 std::chrono::nanoseconds since_started) {
  const RequestTimings& t = done.timings;
  OllamaDurations d;
  d.load_ns = std::max<int64_t>(0, load_wait.count());
  d.total_ns = d.load_ns + std::max<int64_t>(0, since_started.count());
  d.prompt_eval_count = done.usage.prompt_tokens;
  d.eval_count = done.usage.completion_tokens;
  const double prompt_ms = t.cache_restore_ms + t.prefill_ms;
  d.prompt_eval_ns = ms_to_ns(prompt_ms);
  d.eval_ns = ms_to_ns(std::max(0.0, t.ttft_ms - t.queue_ms - prompt_ms)) + ms_to_ns(t.decode_ms);
  return d;
}

std::string ollama_done_reason(const std::string& engine_reason) {
  if (engine_reason == "stop" || engine_reason == "length") return engine_reason;
  return "connection_closed";
}

json ollama_load_answer(OllamaEndpoint endpoint, const std::string& model, const char* done_reason) {
  json j{{"model", model}, {"created_at", rfc3339_now()}};
  put_text(&j, endpoint, "", "", json::array());
  j["done"] = true;
  j["done_reason"] = done_reason;
  return j;
}

std::unique_ptr<ResponseWriter> ollama_writer(OllamaMeta meta, bool stream) {
  return std::make_unique<OllamaWriter>(std::move(meta), stream);
}

}  // namespace hearth::ipc
