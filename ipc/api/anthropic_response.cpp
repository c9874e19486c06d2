#include "ipc/api/anthropic_response.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// One content block of a whole answer as it accumulates.
struct Block {
  bool tool = false;
  bool thinking = false;
  std::string text;      // text: the text; thinking: the reasoning; tool_use: its input's JSON text
  std::string id, name;  // tool_use
};

// The message with no content and no stop_reason yet: message_start's, and the whole
// answer's start.
json message_shell(const AnthropicMeta& meta) {
  return json{{"id", meta.id},           {"type", "message"},        {"role", "assistant"},
              {"model", meta.model},     {"content", json::array()}, {"stop_reason", nullptr},
              {"stop_sequence", nullptr}};
}

json stop_sequence_json(const ApiEvent& done) {
  return done.finish_reason == "stop" && !done.stop_sequence.empty() ? json(done.stop_sequence) : json(nullptr);
}

std::string sse(const char* event, const json& data) {
  return std::string("event: ") + event + "\ndata: " + dump_json(data) + "\n\n";
}

// A tool_use block's input: its arguments' JSON text parsed ("" is no arguments); nullopt
// when that is not a JSON object.
std::optional<json> call_input(const std::string& arguments) {
  if (arguments.empty()) return json::object();
  json j = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

class AnthropicWriter final : public ResponseWriter {
 public:
  AnthropicWriter(AnthropicMeta meta, bool stream) : meta_(std::move(meta)), stream_(stream) {}

  bool streamed() const override { return stream_; }
  ErrorShape error_shape() const override { return ErrorShape::Anthropic; }

  // message_start, then a ping at once, as Anthropic sends one: the client sees the stream
  // is alive while the prompt is read. The prompt's split between cache and prefill is known
  // only at the end: message_delta's usage has it.
  std::string open() override {
    json message = message_shell(meta_);
    message["usage"] = json{{"input_tokens", meta_.prompt_tokens}, {"output_tokens", 0}};
    return sse("message_start", json{{"type", "message_start"}, {"message", std::move(message)}}) +
           sse("ping", json{{"type", "ping"}});
  }

  void prompt_counted(int32_t n_tokens) override { meta_.prompt_tokens = n_tokens; }

  std::string write(const ApiEvent& ev) override { return stream_ ? stream(ev) : collect(ev); }

  HttpResponse response() override { return response_; }

 private:
  enum class Open { None, Text, Thinking, Tool };

  std::string stream(const ApiEvent& ev) {
    switch (ev.kind) {
      case ApiEvent::Kind::Text:
        if (ev.text.empty()) return "";
        return (open_ == Open::Text ? "" : open_block(Open::Text, json{{"type", "text"}, {"text", ""}})) +
               delta(json{{"type", "text_delta"}, {"text", ev.text}});
      case ApiEvent::Kind::Reasoning:  // hearth signs nothing: the signature stays empty
        if (ev.text.empty()) return "";
        return (open_ == Open::Thinking
                    ? ""
                    : open_block(Open::Thinking, json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}})) +
               delta(json{{"type", "thinking_delta"}, {"thinking", ev.text}});
      case ApiEvent::Kind::CallBegin:
        called_tools_ = true;
        return open_block(
            Open::Tool,
            json{{"type", "tool_use"}, {"id", ev.call_id}, {"name", ev.call_name}, {"input", json::object()}});
      case ApiEvent::Kind::CallArguments:
        if (ev.text.empty() || open_ != Open::Tool) return "";
        return delta(json{{"type", "input_json_delta"}, {"partial_json", ev.text}});
      case ApiEvent::Kind::CallEnd:
        return close_block();
      case ApiEvent::Kind::Done: {
        json message_delta{{"type", "message_delta"},
                           {"delta",
                            {{"stop_reason", anthropic_stop_reason(ev, called_tools_, meta_.max_tokens)},
                             {"stop_sequence", stop_sequence_json(ev)}}},
                           {"usage", anthropic_usage(ev.usage)},
                           {"timings", timings_object(ev)}};
        return close_block() + sse("message_delta", message_delta) +
               sse("message_stop", json{{"type", "message_stop"}});
      }
      case ApiEvent::Kind::Error:
        response_ = error_response(ev.error, ErrorShape::Anthropic);
        return "event: error\ndata: " + error_body(ev.error, ErrorShape::Anthropic) + "\n\n";
    }
    return "";
  }

  // content_block_start of the next block (the open one closed first).
  std::string open_block(Open kind, json content_block) {
    std::string out = close_block();
    index_ = next_index_++;
    open_ = kind;
    return out +
           sse("content_block_start",
               json{{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
  }

  std::string close_block() {
    if (open_ == Open::None) return "";
    open_ = Open::None;
    return sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}});
  }

  std::string delta(json d) {
    return sse("content_block_delta",
               json{{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
  }

  std::string collect(const ApiEvent& ev) {
    switch (ev.kind) {
      case ApiEvent::Kind::Text:
        if (ev.text.empty()) break;
        if (blocks_.empty() || blocks_.back().tool || blocks_.back().thinking) blocks_.emplace_back();
        blocks_.back().text += ev.text;
        break;
      case ApiEvent::Kind::Reasoning:
        if (ev.text.empty()) break;
        if (blocks_.empty() || !blocks_.back().thinking) blocks_.push_back(Block{false, true, "", "", ""});
        blocks_.back().text += ev.text;
        break;
      case ApiEvent::Kind::CallBegin:
        called_tools_ = true;
        blocks_.push_back(Block{true, false, "", ev.call_id, ev.call_name});
        break;
      case ApiEvent::Kind::CallArguments:
        if (!blocks_.empty() && blocks_.back().tool) blocks_.back().text += ev.text;
        break;
      case ApiEvent::Kind::CallEnd:
        break;
      case ApiEvent::Kind::Done:
        response_ = whole_message(ev);
        break;
      case ApiEvent::Kind::Error:
        response_ = error_response(ev.error, ErrorShape::Anthropic);
        break;
    }
    return "";
  }

  HttpResponse whole_message(const ApiEvent& done) const {
    json content = json::array();
    for (const Block& b : blocks_) {
      if (b.thinking) {
        content.push_back(json{{"type", "thinking"}, {"thinking", b.text}, {"signature", ""}});
        continue;
      }
      if (!b.tool) {
        content.push_back(json{{"type", "text"}, {"text", b.text}});
        continue;
      }
      std::optional<json> input = call_input(b.text);
      if (!input) {
        return error_response(
            internal_error("the model's call of '" + b.name + "' has arguments that are not a JSON object"),
            ErrorShape::Anthropic);
      }
      content.push_back(json{{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", std::move(*input)}});
    }
    json j = message_shell(meta_);
    j["content"] = std::move(content);
    j["stop_reason"] = anthropic_stop_reason(done, called_tools_, meta_.max_tokens);
    j["stop_sequence"] = stop_sequence_json(done);
    j["usage"] = anthropic_usage(done.usage);
    j["timings"] = timings_object(done);
    return HttpResponse{200, "application/json", dump_json(j), "", {}};
  }

  AnthropicMeta meta_;
  bool stream_;
  bool called_tools_ = false;
  // Streamed: the block that is open, and the index of the last one opened.
  Open open_ = Open::None;
  int next_index_ = 0;
  int index_ = 0;
  std::vector<Block> blocks_;  // whole: the content so far
  HttpResponse response_;
};

}  // namespace

AnthropicMeta new_anthropic_meta(const std::string& model_id, int32_t max_tokens) {
  AnthropicMeta m;
  m.id = random_id("msg_");
  m.model = model_id;
  m.max_tokens = max_tokens;
  return m;
}

std::string anthropic_stop_reason(const ApiEvent& done, bool called_tools, int32_t max_tokens) {
  if (done.finish_reason == "stop") {
    if (!done.stop_sequence.empty()) return "stop_sequence";
    return called_tools ? "tool_use" : "end_turn";
  }
  if (done.finish_reason == "length" && max_tokens > 0 && done.usage.completion_tokens < max_tokens)
    return "model_context_window_exceeded";
  return "max_tokens";
}

json anthropic_usage(const RequestUsage& u) {
  return json{{"input_tokens", u.prompt_tokens - u.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", u.cached_tokens},
              {"output_tokens", u.completion_tokens}};
}

std::unique_ptr<ResponseWriter> anthropic_writer(AnthropicMeta meta, bool stream) {
  return std::make_unique<AnthropicWriter>(std::move(meta), stream);
}

}  // namespace hearth::ipc
