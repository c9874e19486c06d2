// OpenAI's tool calling on the request side (issue 40): `tools`, `tool_choice` and
// `parallel_tool_calls` into the internal request, assistant messages' `tool_calls` and
// `tool` messages into the conversation. Validated here, so that nothing malformed reaches a
// template or a grammar.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "ipc/generation.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

// tools: function tools only, each {"type": "function", "function": {"name" (1-64 letters,
// digits, '_' or '-', unique), "description", "parameters" (a JSON Schema object; absent:
// no arguments), "strict"}}. tool_choice: "none", "auto", "required" or {"type":
// "function", "function": {"name"}} naming an offered tool; default "auto" with tools,
// "none" without. parallel_tool_calls: a boolean. The legacy `functions` and
// `function_call` get a 400 that points to tools. False (and r holds the error) on the
// first problem.
bool read_tools(FieldReader& r, ApiRequest* out);

// How strictly function tools are read: OpenAI's rules (the default), or Ollama's (no type
// needed, any non-empty name).
struct ToolRules {
  bool type_optional = false;
  bool openai_names = true;  // 1-64 letters, digits, '_' or '-'
};

// `tools`, an array of {"type": "function", "function": {"name", "description",
// "parameters", "strict"}}: each read as read_tools says, names unique.
bool read_function_tools(FieldReader& r, ToolRules rules, std::vector<Tool>* out);

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments" (a JSON object, as text)}}]. param names the message ("messages[3]").
bool read_tool_calls(FieldReader& r, const nlohmann::ordered_json& calls, const std::string& param,
                     std::vector<ToolCall>* out);

// Every tool message answers a call an earlier assistant message made (its tool_call_id),
// and each call id is given once.
bool check_tool_messages(FieldReader& r, const std::vector<ChatMessage>& messages);

}  // namespace hearth::ipc
