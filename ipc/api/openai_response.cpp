#include "ipc/api/openai_response.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

json usage_json(const RequestUsage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json byte_values(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

// JSON has no -inf: a token the mask ruled out reads as OpenAI's floor, -9999.
double finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

// Chat's logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& tokens) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    json top = json::array();
    for (const TokenLogprob::Alternative& a : t.top)
      top.push_back({{"token", a.bytes}, {"logprob", finite_logprob(a.logprob)}, {"bytes", byte_values(a.bytes)}});
    content.push_back({{"token", t.bytes},
                       {"logprob", finite_logprob(t.logprob)},
                       {"bytes", byte_values(t.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

// Completions' logprobs (the legacy shape): parallel arrays, and the alternatives as a map
// from token text to logprob; text_offset counts bytes from the start of the answer.
json completion_logprobs(const std::vector<TokenLogprob>& tokens, size_t first_offset) {
  json text = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = first_offset;
  for (const TokenLogprob& t : tokens) {
    text.push_back(t.bytes);
    lps.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const TokenLogprob::Alternative& a : t.top) top[a.bytes] = finite_logprob(a.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += t.bytes.size();
  }
  return json{{"tokens", text}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json logprobs_json(const ResponseMeta& meta, const std::vector<TokenLogprob>& tokens, size_t first_offset) {
  if (!meta.logprobs) return nullptr;
  return meta.endpoint == Endpoint::Chat ? chat_logprobs(tokens) : completion_logprobs(tokens, first_offset);
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

json chunk_base(const ResponseMeta& meta) {
  json j;
  j["id"] = meta.id;
  j["object"] = meta.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

// One choice of a stream chunk; content is the delta (chat) or the text.
json chunk_choice(const ResponseMeta& meta, const json& delta_or_text, const json& finish_reason,
                  json logprobs = nullptr) {
  if (meta.endpoint == Endpoint::Chat)
    return json{{"index", 0}, {"delta", delta_or_text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  return json{{"text", delta_or_text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

std::string chunk_with(const ResponseMeta& meta, json choice) {
  json j = chunk_base(meta);
  j["choices"] = json::array({std::move(choice)});
  if (meta.include_usage) j["usage"] = nullptr;  // as OpenAI: null in every chunk but the last
  return dump_json(j);
}

// hearth's timings, and which upstream a fallback model answers for.
json meta_timings(const ResponseMeta& meta, const ApiEvent& done) {
  json t = timings_object(done);
  if (!meta.fallback_from.empty()) {
    t["fallback_from"] = meta.fallback_from;
    t["fallback_reason"] = meta.fallback_reason;
  }
  return t;
}

}  // namespace

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model_id, bool include_usage) {
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_id("");
  m.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.model = model_id;
  m.include_usage = include_usage;
  return m;
}

std::string openai_finish_reason(const std::string& engine_reason, bool called_tools) {
  if (engine_reason == "stop") return called_tools ? "tool_calls" : "stop";
  return "length";  // "length", and "cancelled" (see the header)
}

std::string completion_body(const ResponseMeta& meta, const OpenAiAnswer& answer, const ApiEvent& done) {
  json j;
  j["id"] = meta.id;
  j["object"] = meta.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion";
  j["created"] = meta.created;
  j["model"] = meta.model;
  const std::string reason = openai_finish_reason(done.finish_reason, !answer.tool_calls.empty());
  const json logprobs = logprobs_json(meta, answer.logprobs, 0);
  if (meta.endpoint == Endpoint::Chat) {
    json message{{"role", "assistant"}, {"content", answer.text}};
    if (!answer.reasoning.empty()) message["reasoning_content"] = answer.reasoning;
    if (!answer.tool_calls.empty()) {
      if (answer.text.empty()) message["content"] = nullptr;  // as OpenAI: a call alone has no content
      message["tool_calls"] = tool_calls_json(answer.tool_calls);
    }
    j["choices"] = json::array(
        {json{{"index", 0}, {"message", std::move(message)}, {"logprobs", logprobs}, {"finish_reason", reason}}});
  } else {
    j["choices"] =
        json::array({json{{"text", answer.text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", reason}}});
  }
  j["usage"] = usage_json(done.usage);
  j["timings"] = meta_timings(meta, done);
  return dump_json(j);
}

std::string chunk_role(const ResponseMeta& meta) {
  const json choice = chunk_choice(meta, json{{"role", "assistant"}, {"content", ""}}, nullptr);
  if (!meta.include_usage || !meta.continuous_usage || meta.prompt_tokens < 0) return chunk_with(meta, choice);
  json j = chunk_base(meta);
  j["choices"] = json::array({choice});
  j["usage"] = {{"prompt_tokens", meta.prompt_tokens}, {"completion_tokens", 0}, {"total_tokens", meta.prompt_tokens}};
  return dump_json(j);
}

std::string chunk_text(const ResponseMeta& meta, const std::string& piece, const std::vector<TokenLogprob>& logprobs,
                       size_t text_offset) {
  const json content = meta.endpoint == Endpoint::Chat ? json{{"content", piece}} : json(piece);
  return chunk_with(meta, chunk_choice(meta, content, nullptr, logprobs_json(meta, logprobs, text_offset)));
}

std::string chunk_reasoning(const ResponseMeta& meta, const std::string& piece,
                            const std::vector<TokenLogprob>& logprobs) {
  return chunk_with(meta,
                    chunk_choice(meta, json{{"reasoning_content", piece}}, nullptr, logprobs_json(meta, logprobs, 0)));
}

std::string chunk_call_begin(const ResponseMeta& meta, const ApiEvent& begin) {
  const json call{{"index", begin.call_index},
                  {"id", begin.call_id},
                  {"type", "function"},
                  {"function", {{"name", begin.call_name}, {"arguments", ""}}}};
  return chunk_with(meta, chunk_choice(meta, json{{"tool_calls", json::array({call})}}, nullptr));
}

std::string chunk_call_arguments(const ResponseMeta& meta, const ApiEvent& piece) {
  const json call{{"index", piece.call_index}, {"function", {{"arguments", piece.text}}}};
  return chunk_with(meta, chunk_choice(meta, json{{"tool_calls", json::array({call})}}, nullptr));
}

std::string chunk_finish(const ResponseMeta& meta, const ApiEvent& done, bool called_tools) {
  const json empty = meta.endpoint == Endpoint::Chat ? json::object() : json("");
  json j = chunk_base(meta);
  j["choices"] = json::array({chunk_choice(meta, empty, openai_finish_reason(done.finish_reason, called_tools))});
  if (meta.include_usage) j["usage"] = nullptr;
  j["timings"] = meta_timings(meta, done);
  return dump_json(j);
}

std::string chunk_usage(const ResponseMeta& meta, const ApiEvent& done) {
  json j = chunk_base(meta);
  j["choices"] = json::array();
  j["usage"] = usage_json(done.usage);
  j["timings"] = meta_timings(meta, done);
  return dump_json(j);
}

std::string sse_event(const std::string& payload) {
  return "data: " + payload + "\n\n";
}

namespace {

// Streamed: the role chunk (chat), a chunk per text piece and per piece of a call, the
// finish chunk, the usage chunk (include_usage), [DONE]; an engine failure is an error
// object, then [DONE]. Whole: the text, calls and logprobs collected, the body at the end.
class OpenAiWriter final : public ResponseWriter {
 public:
  OpenAiWriter(ResponseMeta meta, bool stream) : meta_(std::move(meta)), stream_(stream) {}

  bool streamed() const override { return stream_; }

  std::string open() override { return meta_.endpoint == Endpoint::Chat ? sse_event(chunk_role(meta_)) : ""; }

  void prompt_counted(int32_t n_tokens) override { meta_.prompt_tokens = n_tokens; }

  std::string write(const ApiEvent& ev) override {
    switch (ev.kind) {
      case ApiEvent::Kind::Text:
        if (stream_) {
          const size_t offset = streamed_bytes_;
          streamed_bytes_ += ev.text.size();
          return sse_event(chunk_text(meta_, ev.text, ev.logprobs, offset));
        }
        answer_.text += ev.text;
        answer_.logprobs.insert(answer_.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
        return "";
      case ApiEvent::Kind::Reasoning:
        if (stream_) return sse_event(chunk_reasoning(meta_, ev.text, ev.logprobs));
        answer_.reasoning += ev.text;
        answer_.logprobs.insert(answer_.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
        return "";
      case ApiEvent::Kind::CallBegin:
        answer_.tool_calls.push_back(ToolCall{ev.call_id, ev.call_name, ""});
        return stream_ ? sse_event(chunk_call_begin(meta_, ev)) : "";
      case ApiEvent::Kind::CallArguments:
        if (!answer_.tool_calls.empty()) answer_.tool_calls.back().arguments += ev.text;
        return stream_ ? sse_event(chunk_call_arguments(meta_, ev)) : "";
      case ApiEvent::Kind::CallEnd:
        return "";
      case ApiEvent::Kind::Done:
        if (!stream_) {
          response_ = HttpResponse{200, "application/json", completion_body(meta_, answer_, ev), "", {}};
          return "";
        }
        return sse_event(chunk_finish(meta_, ev, !answer_.tool_calls.empty())) +
               (meta_.include_usage ? sse_event(chunk_usage(meta_, ev)) : "") + kDone;
      case ApiEvent::Kind::Error:
        response_ = error_response(ev.error);
        return stream_ ? sse_event(error_body(ev.error)) + kDone : "";
    }
    return "";
  }

  HttpResponse response() override { return response_; }

 private:
  static constexpr const char* kDone = "data: [DONE]\n\n";
  ResponseMeta meta_;
  bool stream_;
  OpenAiAnswer answer_;        // whole: everything said; streamed: the calls, for the finish_reason
  size_t streamed_bytes_ = 0;  // text sent so far (completions' text_offset)
  HttpResponse response_;
};

}  // namespace

std::unique_ptr<ResponseWriter> openai_writer(ResponseMeta meta, bool stream) {
  return std::make_unique<OpenAiWriter>(std::move(meta), stream);
}

}  // namespace hearth::ipc
