#include "ipc/api/openai_response.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::json;

namespace {

json usage_json(const RequestUsage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json chunk_base(const ResponseMeta& meta) {
  json j;
  j["id"] = meta.id;
  j["object"] = meta.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

// One choice of a stream chunk; content is the delta's text (chat) or the text.
json chunk_choice(const ResponseMeta& meta, const json& delta_or_text, const json& finish_reason) {
  json c;
  if (meta.endpoint == Endpoint::Chat) {
    c = json{{"index", 0}, {"delta", delta_or_text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  } else {
    c = json{{"text", delta_or_text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  }
  return c;
}

std::string chunk_with(const ResponseMeta& meta, json choice) {
  json j = chunk_base(meta);
  j["choices"] = json::array({std::move(choice)});
  if (meta.include_usage) j["usage"] = nullptr;  // as OpenAI: null in every chunk but the last
  return dump_json(j);
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

std::string openai_finish_reason(const std::string& engine_reason) {
  if (engine_reason == "stop") return "stop";
  return "length";  // "length", and "cancelled" (see the header)
}

std::string completion_body(const ResponseMeta& meta, const std::string& text, const ApiEvent& finished) {
  json j;
  j["id"] = meta.id;
  j["object"] = meta.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion";
  j["created"] = meta.created;
  j["model"] = meta.model;
  const std::string reason = openai_finish_reason(finished.finish_reason);
  if (meta.endpoint == Endpoint::Chat) {
    j["choices"] = json::array({json{{"index", 0},
                                     {"message", {{"role", "assistant"}, {"content", text}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", reason}}});
  } else {
    j["choices"] = json::array({json{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}}});
  }
  j["usage"] = usage_json(finished.usage);
  j["timings"] = timings_object(finished);
  return dump_json(j);
}

std::string chunk_role(const ResponseMeta& meta) {
  return chunk_with(meta, chunk_choice(meta, json{{"role", "assistant"}, {"content", ""}}, nullptr));
}

std::string chunk_text(const ResponseMeta& meta, const std::string& piece) {
  const json content = meta.endpoint == Endpoint::Chat ? json{{"content", piece}} : json(piece);
  return chunk_with(meta, chunk_choice(meta, content, nullptr));
}

std::string chunk_finish(const ResponseMeta& meta, const ApiEvent& finished) {
  const json empty = meta.endpoint == Endpoint::Chat ? json::object() : json("");
  json j = chunk_base(meta);
  j["choices"] = json::array({chunk_choice(meta, empty, openai_finish_reason(finished.finish_reason))});
  if (meta.include_usage) j["usage"] = nullptr;
  j["timings"] = timings_object(finished);
  return dump_json(j);
}

std::string chunk_usage(const ResponseMeta& meta, const ApiEvent& finished) {
  json j = chunk_base(meta);
  j["choices"] = json::array();
  j["usage"] = usage_json(finished.usage);
  j["timings"] = timings_object(finished);
  return dump_json(j);
}

std::string sse_event(const std::string& payload) {
  return "data: " + payload + "\n\n";
}

namespace {

// Streamed: the role chunk (chat), a chunk per text piece, the finish chunk, the usage
// chunk (include_usage), [DONE]; an engine failure is an error object, then [DONE]. Whole:
// the text collected, the body at the end.
class OpenAiWriter final : public ResponseWriter {
 public:
  OpenAiWriter(ResponseMeta meta, bool stream) : meta_(std::move(meta)), stream_(stream) {}

  bool streamed() const override { return stream_; }

  std::string open() override { return meta_.endpoint == Endpoint::Chat ? sse_event(chunk_role(meta_)) : ""; }

  std::string write(const ApiEvent& ev) override {
    switch (ev.kind) {
      case ApiEvent::Kind::Text:
        if (stream_) return sse_event(chunk_text(meta_, ev.text));
        text_ += ev.text;
        return "";
      case ApiEvent::Kind::Done:
        if (!stream_) {
          response_ = HttpResponse{200, "application/json", completion_body(meta_, text_, ev), "", {}};
          return "";
        }
        return sse_event(chunk_finish(meta_, ev)) + (meta_.include_usage ? sse_event(chunk_usage(meta_, ev)) : "") +
               kDone;
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
  std::string text_;
  HttpResponse response_;
};

}  // namespace

std::unique_ptr<ResponseWriter> openai_writer(ResponseMeta meta, bool stream) {
  return std::make_unique<OpenAiWriter>(std::move(meta), stream);
}

}  // namespace hearth::ipc
