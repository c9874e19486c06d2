#include "ipc/api/upstream_translate.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/sampling/defaults.h"
#include "ipc/upstream_relay.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

json message_json(const ChatMessage& m) {
  json j{{"role", m.role}};
  if (m.parts.empty()) {
    j["content"] = m.content;
  } else {
    json parts = json::array();
    for (const std::string& p : m.parts) parts.push_back({{"type", "text"}, {"text", p}});
    j["content"] = std::move(parts);
  }
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : m.tool_calls)
      calls.push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    j["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
  return j;
}

void put_sampling(const ApiRequest& req, json* body) {
  const SamplingParams& s = req.sampling;
  json& b = *body;
  if (req.sampling_given & kSetTemperature) b["temperature"] = s.temperature;
  if (req.sampling_given & kSetTopK) b["top_k"] = s.top_k;
  if (req.sampling_given & kSetTopP) b["top_p"] = s.top_p;
  if (req.sampling_given & kSetMinP) b["min_p"] = s.min_p;
  if (req.sampling_given & kSetRepetitionPenalty) b["repetition_penalty"] = s.repetition_penalty;
  if (s.presence_penalty != 0.0f) b["presence_penalty"] = s.presence_penalty;
  if (s.frequency_penalty != 0.0f) b["frequency_penalty"] = s.frequency_penalty;
  if (s.seed != kRandomSeed) b["seed"] = s.seed;
}

void put_format(const ResponseFormat& f, json* body) {
  if (f.kind == ResponseFormat::Kind::JsonObject) (*body)["response_format"] = {{"type", "json_object"}};
  if (f.kind != ResponseFormat::Kind::JsonSchema) return;
  json schema = json::parse(f.schema, nullptr, /*allow_exceptions=*/false);
  (*body)["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "answer"}, {"schema", std::move(schema)}, {"strict", f.strict}}}};
}

void put_tools(const ApiRequest& req, json* body) {
  if (req.tools.empty()) return;
  json tools = json::array();
  for (const Tool& t : req.tools) tools.push_back(json::parse(t.json, nullptr, /*allow_exceptions=*/false));
  json& b = *body;
  b["tools"] = std::move(tools);
  switch (req.tool_choice) {
    case ToolChoice::None:
      b["tool_choice"] = "none";
      break;
    case ToolChoice::Auto:
      b["tool_choice"] = "auto";
      break;
    case ToolChoice::Required:
      b["tool_choice"] = "required";
      break;
    case ToolChoice::Named:
      b["tool_choice"] = {{"type", "function"}, {"function", {{"name", req.tool_choice_name}}}};
      break;
  }
  if (!req.parallel_tool_calls) b["parallel_tool_calls"] = false;
}

// logprobs: chat's boolean and top_logprobs; completions' number of alternatives.
void put_logprobs(const ApiRequest& req, json* body) {
  if (req.top_logprobs < 0) return;
  if (!req.chat) {
    (*body)["logprobs"] = req.top_logprobs;
    return;
  }
  (*body)["logprobs"] = true;
  (*body)["top_logprobs"] = req.top_logprobs;
}

const json* find(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string string_of(const json& j, const char* key) {
  const json* v = find(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

// A count the upstream sent, clamped to 0..INT32_MAX (so sums and differences of two stay in
// range); 0 when it is not an integer.
int32_t count_of(const json& j, const char* key) {
  const json* v = find(j, key);
  if (v == nullptr || !v->is_number_integer()) return 0;
  if (v->is_number_unsigned()) return static_cast<int32_t>(std::min<uint64_t>(v->get<uint64_t>(), INT32_MAX));
  return static_cast<int32_t>(std::clamp<int64_t>(v->get<int64_t>(), 0, INT32_MAX));
}

// A duration the upstream sent, in ms: clamped to 0..kMaxUpstreamMs (so the nanoseconds of
// Ollama's durations fit an int64); 0 when it is not a number.
constexpr double kMaxUpstreamMs = 1e9;  // 11.6 days: more than any answer takes
double ms_of(const json& j, const char* key) {
  const json* v = find(j, key);
  return v != nullptr && v->is_number() ? std::clamp(v->get<double>(), 0.0, kMaxUpstreamMs) : 0.0;
}

// A logprob the upstream sent, clamped to the floats at or below 0; nullopt when it is not a
// number.
std::optional<float> logprob_of(const json& j, const char* key) {
  const json* v = find(j, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return static_cast<float>(std::clamp(v->get<double>(), -3.0e38, 0.0));
}

// A token's bytes: OpenAI's "bytes" (exact, possibly part of a UTF-8 character) when every
// one is 0..255, else its "token" text.
std::string token_bytes(const json& entry) {
  const json* bytes = find(entry, "bytes");
  if (bytes == nullptr || !bytes->is_array()) return string_of(entry, "token");
  std::string out;
  for (const json& b : *bytes) {
    if (!b.is_number_unsigned() || b.get<uint64_t>() > 255) return string_of(entry, "token");
    out.push_back(static_cast<char>(b.get<uint64_t>()));
  }
  return out;
}

// The most alternatives a token keeps: the most a request may ask for (0..20).
constexpr size_t kMaxAlternatives = 20;

// Chat's logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}. An
// entry without a numeric logprob is skipped. Token ids are not in OpenAI's shape: 0.
std::vector<TokenLogprob> chat_logprobs(const json& lp) {
  std::vector<TokenLogprob> out;
  const json* content = find(lp, "content");
  if (content == nullptr || !content->is_array()) return out;
  for (const json& e : *content) {
    const std::optional<float> logprob = logprob_of(e, "logprob");
    if (!logprob) continue;
    TokenLogprob t;
    t.bytes = token_bytes(e);
    t.logprob = *logprob;
    if (const json* top = find(e, "top_logprobs"); top != nullptr && top->is_array())
      for (const json& a : *top)
        if (const std::optional<float> alt = logprob_of(a, "logprob"); alt && t.top.size() < kMaxAlternatives)
          t.top.push_back({0, token_bytes(a), *alt});
    out.push_back(std::move(t));
  }
  return out;
}

// Completions' (legacy) logprobs: parallel arrays "tokens" and "token_logprobs", and
// "top_logprobs" a map from token text to logprob per token (sorted here, best first).
std::vector<TokenLogprob> completion_logprobs(const json& lp) {
  std::vector<TokenLogprob> out;
  const json* tokens = find(lp, "tokens");
  const json* lps = find(lp, "token_logprobs");
  if (tokens == nullptr || lps == nullptr || !tokens->is_array() || !lps->is_array()) return out;
  const json* tops = find(lp, "top_logprobs");
  for (size_t i = 0; i < tokens->size() && i < lps->size(); ++i) {
    const json& text = (*tokens)[i];
    const json& logprob = (*lps)[i];
    if (!text.is_string() || !logprob.is_number()) continue;
    TokenLogprob t;
    t.bytes = text.get<std::string>();
    t.logprob = static_cast<float>(std::clamp(logprob.get<double>(), -3.0e38, 0.0));
    if (tops != nullptr && tops->is_array() && i < tops->size() && (*tops)[i].is_object())
      for (const auto& [alt, v] : (*tops)[i].items())
        if (v.is_number() && t.top.size() < kMaxAlternatives)
          t.top.push_back({0, alt, static_cast<float>(std::clamp(v.get<double>(), -3.0e38, 0.0))});
    std::stable_sort(t.top.begin(), t.top.end(), [](const auto& a, const auto& b) { return a.logprob > b.logprob; });
    out.push_back(std::move(t));
  }
  return out;
}

// A choice's logprobs, in whichever of the two shapes it has.
std::vector<TokenLogprob> choice_logprobs(const json& choice) {
  const json* lp = find(choice, "logprobs");
  if (lp == nullptr || !lp->is_object()) return {};
  return find(*lp, "content") != nullptr ? chat_logprobs(*lp) : completion_logprobs(*lp);
}

// OpenAI's finish_reason as the engine's: what the writers know.
std::string engine_finish_reason(const std::string& openai) {
  return openai == "length" ? "length" : "stop";
}

}  // namespace

json openai_upstream_body(const ApiRequest& req, const std::string& remote_id, std::optional<bool> enable_thinking) {
  json body{{"model", remote_id}};
  if (req.chat) {
    json messages = json::array();
    for (const ChatMessage& m : req.messages) messages.push_back(message_json(m));
    body["messages"] = std::move(messages);
  } else {
    body["prompt"] = req.prompt;
  }
  if (req.max_tokens >= 0) body["max_tokens"] = req.max_tokens;
  put_sampling(req, &body);
  if (!req.stop.empty()) body["stop"] = req.stop;
  put_format(req.response_format, &body);
  put_tools(req, &body);
  if (enable_thinking) body["chat_template_kwargs"] = {{"enable_thinking", *enable_thinking}};
  if (req.reasoning_budget >= 0) body["thinking_budget_tokens"] = req.reasoning_budget;
  put_logprobs(req, &body);
  body["stream"] = req.stream;
  // continuous_usage_stats (vLLM's; hearthd's in its opening chunk): the prompt's count comes
  // before the answer, as Anthropic's message_start says it.
  if (req.stream) body["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  return body;
}

OpenAiAnswerReader::OpenAiAnswerReader(std::string upstream, Clock::time_point sent)
    : upstream_(std::move(upstream)), sent_(sent) {}

void OpenAiAnswerReader::close_call(std::vector<ApiEvent>* out) {
  if (open_call_ < 0) return;
  ApiEvent e;
  e.kind = ApiEvent::Kind::CallEnd;
  e.call_index = n_calls_ - 1;
  out->push_back(std::move(e));
  open_call_ = -1;
}

// A delta's (or a whole message's) reasoning, text and calls, in that order.
void OpenAiAnswerReader::read_choice(const json& choice, Clock::time_point now, std::vector<ApiEvent>* out) {
  const json* delta = find(choice, "delta");
  if (delta == nullptr) delta = find(choice, "message");
  const json& d = delta != nullptr ? *delta : choice;
  const size_t before = out->size();
  std::vector<TokenLogprob> logprobs = choice_logprobs(choice);
  held_logprobs_.insert(held_logprobs_.end(), std::make_move_iterator(logprobs.begin()),
                        std::make_move_iterator(logprobs.end()));
  auto text = [&](ApiEvent::Kind kind, std::string s) {
    if (s.empty()) return;
    close_call(out);
    ApiEvent e;
    e.kind = kind;
    e.text = std::move(s);
    e.logprobs = std::move(held_logprobs_);  // with the first text they came with, as a local model's
    held_logprobs_.clear();
    out->push_back(std::move(e));
  };
  std::string reasoning = string_of(d, "reasoning_content");
  text(ApiEvent::Kind::Reasoning, reasoning.empty() ? string_of(d, "reasoning") : reasoning);
  text(ApiEvent::Kind::Text, delta != nullptr ? string_of(d, "content") : string_of(choice, "text"));
  if (const json* calls = find(d, "tool_calls"); calls != nullptr && calls->is_array()) {
    for (const json& c : *calls) {
      const json* index = find(c, "index");
      const int i = index != nullptr && index->is_number_integer() ? index->get<int>() : n_calls_;
      const json* fn = find(c, "function");
      if (i != open_call_) {  // a call begins: the one before it ended
        close_call(out);
        ApiEvent b;
        b.kind = ApiEvent::Kind::CallBegin;
        b.call_index = n_calls_++;
        b.call_id = string_of(c, "id");
        b.call_name = fn != nullptr ? string_of(*fn, "name") : "";
        out->push_back(std::move(b));
        open_call_ = i;
      }
      if (std::string args = fn != nullptr ? string_of(*fn, "arguments") : ""; !args.empty()) {
        ApiEvent a;
        a.kind = ApiEvent::Kind::CallArguments;
        a.call_index = n_calls_ - 1;
        a.text = std::move(args);
        out->push_back(std::move(a));
      }
    }
  }
  if (out->size() > before) tokens_.push_back(now);
  if (const json* f = find(choice, "finish_reason"); f != nullptr && f->is_string()) {
    finish_reason_ = f->get<std::string>();
    stop_sequence_ = string_of(choice, "stop_reason");  // vLLM's: the stop string that matched
  }
}

// usage (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens) and, from an
// upstream hearthd, its own timings: where its prompt came from, its prefill.
void OpenAiAnswerReader::read_usage(const json& chunk) {
  if (const json* u = find(chunk, "usage"); u != nullptr && u->is_object()) {
    usage_seen_ = true;
    usage_.prompt_tokens = count_of(*u, "prompt_tokens");
    usage_.completion_tokens = count_of(*u, "completion_tokens");
    if (const json* d = find(*u, "prompt_tokens_details")) usage_.cached_tokens = count_of(*d, "cached_tokens");
    usage_.cached_tokens = std::min(usage_.cached_tokens, usage_.prompt_tokens);  // a part of the prompt, never more
    usage_.prefilled_tokens = usage_.prompt_tokens - usage_.cached_tokens;
  }
  const json* t = find(chunk, "timings");
  if (t == nullptr || !t->is_object()) return;
  upstream_timings_json_ = t->dump();
  upstream_timings_.queue_ms = ms_of(*t, "queue_ms");
  upstream_timings_.cache_restore_ms = ms_of(*t, "cache_restore_ms");
  upstream_timings_.prefill_ms = ms_of(*t, "prefill_ms");
  if (const json* c = find(*t, "cached_tokens")) {
    usage_.cached_memory_tokens = count_of(*c, "memory");
    usage_.cached_disk_tokens = count_of(*c, "disk");
  }
  if (find(*t, "prefilled_tokens") != nullptr) usage_.prefilled_tokens = count_of(*t, "prefilled_tokens");
}

std::vector<ApiEvent> OpenAiAnswerReader::chunk(const json& chunk, Clock::time_point now) {
  std::vector<ApiEvent> out;
  if (const json* err = find(chunk, "error")) {
    ApiEvent e;
    e.kind = ApiEvent::Kind::Error;
    e.error = upstream_answer_error(502, json{{"error", *err}}.dump(), upstream_);
    finish_reason_ = "error";
    out.push_back(std::move(e));
    return out;
  }
  if (const json* choices = find(chunk, "choices"); choices != nullptr && choices->is_array())
    for (const json& c : *choices)
      if (find(c, "index") == nullptr || count_of(c, "index") == 0) read_choice(c, now, &out);
  read_usage(chunk);
  return out;
}

std::vector<ApiEvent> OpenAiAnswerReader::done(Clock::time_point) {
  std::vector<ApiEvent> out;
  close_call(&out);
  if (!held_logprobs_.empty()) {  // tokens whose text never came (a call's): kept, with no text
    ApiEvent t;
    t.kind = ApiEvent::Kind::Text;
    t.logprobs = std::move(held_logprobs_);
    held_logprobs_.clear();
    out.push_back(std::move(t));
  }
  ApiEvent d;
  d.kind = ApiEvent::Kind::Done;
  d.finish_reason = engine_finish_reason(finish_reason_.value_or("stop"));
  if (d.finish_reason == "stop") d.stop_sequence = stop_sequence_;
  d.usage = usage_;
  d.timings = front_timings(sent_, tokens_);
  d.timings.queue_ms = upstream_timings_.queue_ms;
  d.timings.cache_restore_ms = upstream_timings_.cache_restore_ms;
  d.timings.prefill_ms = upstream_timings_.prefill_ms;
  json more{{"upstream", upstream_}};
  if (!upstream_timings_json_.empty()) more["upstream_timings"] = json::parse(upstream_timings_json_);
  d.timings_more = more.dump();
  out.push_back(std::move(d));
  return out;
}

std::vector<ApiEvent> OpenAiAnswerReader::whole(const json& body, Clock::time_point first_byte, Clock::time_point now) {
  const json* choices = find(body, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) {
    ApiEvent e;
    e.kind = ApiEvent::Kind::Error;
    e.error = upstream_answer_error(502, body.dump(), upstream_);
    return {e};
  }
  std::vector<ApiEvent> out;
  read_choice(choices->front(), first_byte, &out);
  read_usage(body);
  // One answer at once: its first byte stands for its first token, nothing for decode.
  tokens_.assign(1, first_byte);
  std::vector<ApiEvent> end = done(now);
  out.insert(out.end(), std::make_move_iterator(end.begin()), std::make_move_iterator(end.end()));
  return out;
}

ApiError upstream_answer_error(int status, const std::string& body, const std::string& upstream) {
  ApiError e;
  e.status = status;
  e.type = status >= 500 ? "upstream_error" : "invalid_request_error";
  e.code = status >= 500 ? "upstream_error" : "upstream_refused";
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string message;
  if (const json* err = find(j, "error"))
    message = err->is_string() ? err->get<std::string>() : string_of(*err, "message");
  if (message.empty()) message = body.substr(0, 300);
  e.message = "the upstream '" + upstream + "' answered HTTP " + std::to_string(status) + ": " + message;
  return e;
}

}  // namespace hearth::ipc
