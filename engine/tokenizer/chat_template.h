// Chat templates rendered natively (no Jinja): the model's tokenizer.chat_template is only
// inspected to tell which family it belongs to, which tool-call syntax it writes (and, for
// ChatML, which system prompt it writes when the conversation has none). Rendering yields
// segments so that the tokenizer can recognise special tokens in template markup but never in
// what users (or tools) wrote.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace hearth {
namespace gguf {
class File;
}

// Qwen3: ChatML with a reasoning block, <think>...</think> (see render_chat).
enum class ChatFamily { Gemma, ChatML, Llama3, Qwen3 };

const char* chat_family_name(ChatFamily f);  // "gemma", "chatml", "llama-3", "qwen3"

// Whether the family's model writes its reasoning in a <think>...</think> block at the start
// of its answer (reasoning.h splits it out).
bool chat_family_thinks(ChatFamily f);

// How a template writes tools, calls and their results (see render_chat).
//  None:    it has no words for them (SmolLM2, Gemma 3, plain Llama 3): tools are an error.
//  Hermes:  Qwen2.5's template (ChatML): a "# Tools" block in the system turn, calls as
//           <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, results as
//           <tool_response> blocks in a user turn.
//  Llama31: Meta's Llama 3.1 template, the whole of it: a system header with "Cutting
//           Knowledge Date"/"Today Date" (tools or not), tools in the first user message, a
//           call as {"name": ..., "parameters": ...}, results in the ipython role.
enum class ToolSyntax { None, Hermes, Llama31 };

const char* tool_syntax_name(ToolSyntax s);  // "none", "hermes", "llama-3.1"

// What render_chat needs to know about a model's template.
struct ChatTemplate {
  ChatTemplate() = default;
  ChatTemplate(ChatFamily f) : family(f) {}  // NOLINT: a family alone is a template

  ChatFamily family = ChatFamily::ChatML;
  // ChatML only: the system turn's text the model's template writes when the first message
  // is not a system message (Qwen2.5: "You are Qwen, created by Alibaba Cloud. ...";
  // SmolLM2: "You are a helpful AI assistant named SmolLM, ..."). Empty: none is written.
  std::string default_system;
  // Hermes needs family ChatML or Qwen3, Llama31 family Llama3.
  ToolSyntax tool_syntax = ToolSyntax::None;
  // Llama31 only: the date written after "Today Date: ", the template's own default (its
  // `set date_string = "..."`; "26 Jul 2024" in Llama 3.1's). A template that would write
  // today's date (strftime_now, Llama 3.2) still gets this fixed one: a prompt that changes
  // daily would defeat the prompt cache, and the model's training saw both.
  std::string date_string;
};

// Recognises a family by the special tokens its Jinja source writes: <start_of_turn> (Gemma),
// <|im_start|> (ChatML; Qwen3 when it also writes <think> and reads enable_thinking),
// <|start_header_id|> (Llama 3). Anything else is an error that names
// the --chat-template override. For ChatML, a string literal of the form
// '<|im_start|>system\n{TEXT}<|im_end|>' in the source gives default_system = TEXT.
// The tool syntax, likewise from the source: Hermes for ChatML that writes <tool_call> (Qwen3
// always: its template does);
// Llama31 for Llama 3 that writes "Cutting Knowledge Date", "Environment: ipython" or
// <|python_tag|>; None otherwise.
Result<ChatTemplate> detect_chat_template(std::string_view jinja_source);
// From the model's tokenizer.chat_template; when the key is absent, Gemma for the Gemma
// architectures and an error (naming the override) otherwise.
Result<ChatTemplate> chat_template_from_gguf(const gguf::File& f);
// The --chat-template override: "chatml", "gemma", "llama3" ("llama-3" too) or "qwen3"; no default
// system prompt, and no tool syntax: the override is for files whose template hearth cannot
// read, so nothing says the model was trained on Qwen's or Llama 3.1's tool prompts, and a
// request with tools gets an error rather than a prompt the model may not understand.
// "qwen3" names one model family, so it brings Qwen3's whole template, tools included.
// Anything else is an error listing the four.
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
  // assistant: the reasoning that came with its answer (OpenAI-compatible servers' field),
  // when the client sent it back; nullopt when absent or null (Qwen3's template then looks
  // for a <think> block in content).
  std::optional<std::string> reasoning_content;
};

// What a template takes besides the messages (llama-server's chat_template_kwargs).
struct ChatOptions {
  // Qwen3: false writes an empty reasoning block after the generation prompt, so the model
  // answers without thinking. Other families ignore it.
  bool enable_thinking = true;
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
//  Qwen3:  ChatML without a default system turn, tools and calls as Hermes below but for:
//          with tools, the system turn is <|im_start|>system\n[{system content}\n\n]# Tools...
//          (no "\n\n" before "# Tools" without a system message); a system message after the
//          first is a turn of its own. An assistant turn's reasoning is its reasoning_content,
//          else the text of its content before the first </think> (after the last <think>
//          there, '\n's stripped), and its content the text after the last </think>
//          ('\n's lstripped). Assistant turns after the last user query (a user message that
//          is not wholly <tool_response>...</tool_response>) are written
//          <|im_start|>assistant\n<think>\n{reasoning, '\n's stripped}\n</think>\n\n{content}
//          when they have reasoning or are the last message; every other assistant turn as
//          <|im_start|>assistant\n{content} (earlier reasoning dropped). Calls follow the
//          content, '\n' between (none before the first when content is empty). Generation
//          prompt: <|im_start|>assistant\n, plus <think>\n\n</think>\n\n without thinking.
// Unknown roles and (Gemma) broken alternation are errors.
//
// Tools (a non-empty `tools`), assistant messages with tool_calls and "tool" messages are
// written in the template's tool syntax; with ToolSyntax::None they are an error that says the
// model's template has no tool-call syntax (never dropped). `tojson` below is Python's
// json.dumps (python_json.h); a tool is written from Tool::json (when that is empty, from
// {"type": "function", "function": {"name", "description" (when not empty), "parameters"}}),
// a call's arguments as the object their JSON text holds -- how llama.cpp and vLLM hand them
// to templates -- with empty text taken as {} and malformed text an error.
//  Hermes (Qwen2.5), a ChatML render but for:
//    with tools, the system turn: <|im_start|>system\n{the first message's content when it is
//      a system message, else default_system}\n\n# Tools\n\nYou may call one or more
//      ...<tools>[\n{tool|tojson}]...\n</tools>\n\nFor each function call, ...
//      </tool_call><|im_end|>\n
//    an assistant message with calls: <|im_start|>assistant[\n{content, when not empty}]
//      [\n<tool_call>\n{"name": "{name}", "arguments": {arguments|tojson}}\n</tool_call>]...
//      <|im_end|>\n
//    tool messages: each run of consecutive ones is one user turn: <|im_start|>user
//      [\n<tool_response>\n{content}\n</tool_response>]...<|im_end|>\n
//  Llama31 (Meta's Llama 3.1 template, tools or not):
//    <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n[Environment: ipython\n
//      (with tools)]Cutting Knowledge Date: December 2023\nToday Date: {date_string}\n\n
//      {first message's content|trim, when it is a system message}<|eot_id|>
//    with tools, the next message (whatever its role; none is an error) becomes the user turn
//      "Given the following functions, ...Do not use variables.\n\n"[{tool|tojson(indent=4)}
//      \n\n]...{its content|trim}<|eot_id|>
//    an assistant message with calls: <|start_header_id|>assistant<|end_header_id|>\n\n
//      {"name": "{name}", "parameters": {arguments|tojson}}<|eot_id|> -- its content is not
//      written, and more than one call is an error (the template raises; Llama 3.1 makes one
//      call a turn)
//    a tool message: <|start_header_id|>ipython<|end_header_id|>\n\n{content|tojson}<|eot_id|>
//      (the template tests `content is iterable`, which a string is: results are written as
//      JSON strings)
//    other messages as Llama3 above.
// Tool JSON, function names, arguments and results are content segments, never markup.
Result<std::vector<ChatSegment>> render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt, const std::vector<Tool>& tools = {},
                                             const ChatOptions& options = {});

// The segments joined, for logs and tests.
std::string join_segments(const std::vector<ChatSegment>& segments);

}  // namespace hearth
