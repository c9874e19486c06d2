// Pieces the per-template renderers share, and the renderers of the templates with a tool
// syntax (chat_hermes.cpp, chat_llama31.cpp, chat_qwen3.cpp). Internal to engine/tokenizer; render_chat
// (chat_template.h) is the way in, and its comment is the specification.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/tokenizer/chat_template.h"

namespace hearth::tok {

// Jinja's `trim` (Python str.strip() on ASCII whitespace).
std::string trim(std::string_view s);

// Appends a segment (nothing when text is empty); markup: the template's own text.
void add(std::vector<ChatSegment>& out, std::string text, bool markup);

// Hermes tool calling (Qwen2.5's and Qwen3's templates, chat_hermes.cpp): after the tools'
// heading, each tool's JSON on a line and the calling instructions (ending the system turn);
// a call as <tool_call>{"name": ..., "arguments": ...}</tool_call>; message i, a tool result,
// inside <tool_response> tags, a run of results making one user turn.
Status add_hermes_tools(std::vector<ChatSegment>& out, const std::vector<Tool>& tools);
Status add_hermes_call(std::vector<ChatSegment>& out, const ToolCall& call, size_t message_index);
void add_tool_response(std::vector<ChatSegment>& out, const std::vector<ChatMessage>& messages, size_t i);

// system, user and assistant; "tool" too when `tool_role` (a template with a tool syntax).
Status check_role(const ChatMessage& m, size_t i, bool tool_role);

// `tool | tojson` (indent < 0) or `tool | tojson(indent=N)`: Tool::json as Python writes it.
Result<std::string> tool_json(const Tool& tool, int indent);
// `tool_call.arguments | tojson`, the arguments parsed from their JSON text; "" is {}.
// Errors name the message and the call.
Result<std::string> arguments_json(const ToolCall& call, size_t message_index);

Result<std::vector<ChatSegment>> render_hermes(const std::string& default_system,
                                               const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                               const std::vector<Tool>& tools);
Result<std::vector<ChatSegment>> render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const std::vector<Tool>& tools, bool enable_thinking);
Result<std::vector<ChatSegment>> render_llama31(const std::string& date_string,
                                                const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                const std::vector<Tool>& tools);

}  // namespace hearth::tok
