// Chat templates rendered natively (no Jinja): the model's tokenizer.chat_template is only
// inspected to tell which family it belongs to (and, for ChatML, which system prompt it
// writes when the conversation has none). Rendering yields segments so that the tokenizer
// can recognise special tokens in template markup but never in what users wrote.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace hearth {
namespace gguf {
class File;
}

enum class ChatFamily { Gemma, ChatML, Llama3 };

const char* chat_family_name(ChatFamily f);  // "gemma", "chatml", "llama-3"

// What render_chat needs to know about a model's template.
struct ChatTemplate {
  ChatTemplate() = default;
  ChatTemplate(ChatFamily f) : family(f) {}  // NOLINT: a family alone is a template

  ChatFamily family = ChatFamily::ChatML;
  // ChatML only: the system turn's text the model's template writes when the first message
  // is not a system message (Qwen2.5: "You are Qwen, created by Alibaba Cloud. ...";
  // SmolLM2: "You are a helpful AI assistant named SmolLM, ..."). Empty: none is written.
  std::string default_system;
};

// Recognises a family by the special tokens its Jinja source writes: <start_of_turn> (Gemma),
// <|im_start|> (ChatML), <|start_header_id|> (Llama 3). Anything else is an error that names
// the --chat-template override. For ChatML, a string literal of the form
// '<|im_start|>system\n{TEXT}<|im_end|>' in the source gives default_system = TEXT.
Result<ChatTemplate> detect_chat_template(std::string_view jinja_source);
// From the model's tokenizer.chat_template; when the key is absent, Gemma for the Gemma
// architectures and an error (naming the override) otherwise.
Result<ChatTemplate> chat_template_from_gguf(const gguf::File& f);
// The --chat-template override: "chatml", "gemma" or "llama3" ("llama-3" too); no default
// system prompt. Anything else is an error listing the three.
Result<ChatTemplate> chat_template_from_name(std::string_view name);
// The override when `name` is not empty, else what the file's template says.
Result<ChatTemplate> chat_template_for_model(const gguf::File& f, std::string_view name);

// A function the model may call (OpenAI's tools[].function), as the client described it.
struct Tool {
  std::string name;
  std::string description;  // "" when absent
  std::string parameters;   // its arguments' JSON Schema (an object), as JSON text
  bool strict = false;      // OpenAI's strict: the arguments must follow the schema exactly
  // The whole tool object as the client sent it ({"type": "function", "function": {...}}),
  // as JSON text: what a template that renders `tool | tojson` renders, keys in the client's
  // order.
  std::string json;
};

// A call the assistant made (OpenAI's tool_calls[]), or one it is making.
struct ToolCall {
  std::string id;         // "call_..." (the client's, in a conversation it sends back)
  std::string name;       // the function's
  std::string arguments;  // a JSON object, as text
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_, std::vector<std::string> parts_ = {})
      : role(std::move(role_)), content(std::move(content_)), parts(std::move(parts_)) {}

  std::string role;     // "system", "user", "assistant" or "tool"
  std::string content;  // the text; for content given as parts, the parts joined (see below)
  // Content given as text parts (OpenAI's [{"type":"text","text":...}, ...]), in order;
  // empty when it was given as a string. Only Gemma's template reads the parts themselves;
  // the others see `content`.
  std::vector<std::string> parts;
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made (content may be empty)
  std::string tool_call_id;          // tool: the call this message answers
  std::string name;                  // tool: the function's name, when the client gave it
};

// A message whose content was given as text parts: content = the non-empty-prefixed parts
// joined with '\n' (a part is preceded by '\n' only when the text so far is not empty),
// which is how OpenAI-compatible servers hand typed content to templates that take strings.
ChatMessage message_from_parts(std::string role, std::vector<std::string> parts);

struct ChatSegment {
  std::string text;
  bool markup;  // written by the template: may contain special tokens
};

// The prompt as the family's reference template renders it, BOS included where the template
// writes one (<bos>, <|begin_of_text|>):
//  Gemma:  <bos><start_of_turn>user\n{system}\n\n{user|trim}<end_of_turn>\n
//          <start_of_turn>model\n{assistant|trim}<end_of_turn>\n ... [<start_of_turn>model\n]
//          system only as the first message; then user/assistant must alternate, user first.
//          Content given as parts: each part trimmed, joined with nothing between; a system
//          message given as parts contributes its first part only (as Gemma 3's template).
//  ChatML: [<|im_start|>system\n{default_system}<|im_end|>\n when the first message is not
//          a system message and the template has a default]
//          <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//  Llama3: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}
//          <|eot_id|> ... [<|start_header_id|>assistant<|end_header_id|>\n\n]
// Unknown roles and (Gemma) broken alternation are errors.
Result<std::vector<ChatSegment>> render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt);

// The segments joined, for logs and tests.
std::string join_segments(const std::vector<ChatSegment>& segments);

}  // namespace hearth
