// Qwen2.5's chat template (the one in tests/fixtures/chat_templates.json), which Hermes-style
// tool calling follows: ChatML, the tools listed in the system turn, calls in <tool_call> tags,
// results in <tool_response> tags inside a user turn.
#include "engine/tokenizer/chat_render.h"

namespace hearth::tok {
namespace {

constexpr const char* kToolsHead =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr const char* kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// The first turn: the first message when it is a system message, else the default; with
// tools, followed by their list and the instructions.
Status system_turn(std::vector<ChatSegment>& out, const std::string& default_system,
                   const std::vector<ChatMessage>& messages, const std::vector<Tool>& tools) {
  const bool first_system = !messages.empty() && messages[0].role == "system";
  if (tools.empty() && !first_system && default_system.empty()) return {};
  add(out, "<|im_start|>system\n", true);
  add(out, first_system ? messages[0].content : default_system, false);
  if (tools.empty()) {
    add(out, "<|im_end|>\n", true);
    return {};
  }
  add(out, kToolsHead, true);
  return add_hermes_tools(out, tools);
}

Status assistant_calls(std::vector<ChatSegment>& out, const ChatMessage& m, size_t i) {
  add(out, "<|im_start|>assistant", true);
  if (!m.content.empty()) {
    add(out, "\n", true);
    add(out, m.content, false);
  }
  for (const ToolCall& call : m.tool_calls) {
    add(out, "\n", true);
    if (Status s = add_hermes_call(out, call, i); !s.ok()) return s;
  }
  add(out, "<|im_end|>\n", true);
  return {};
}

}  // namespace

Status add_hermes_tools(std::vector<ChatSegment>& out, const std::vector<Tool>& tools) {
  for (const Tool& tool : tools) {
    Result<std::string> json = tool_json(tool, -1);
    if (!json.ok()) return json.error();
    add(out, "\n", true);
    add(out, std::move(*json), false);
  }
  add(out, kToolsTail, true);
  return {};
}

Status add_hermes_call(std::vector<ChatSegment>& out, const ToolCall& call, size_t message_index) {
  Result<std::string> args = arguments_json(call, message_index);
  if (!args.ok()) return args.error();
  add(out, "<tool_call>\n{\"name\": \"", true);
  add(out, call.name, false);
  add(out, "\", \"arguments\": ", true);
  add(out, std::move(*args), false);
  add(out, "}\n</tool_call>", true);
  return {};
}

void add_tool_response(std::vector<ChatSegment>& out, const std::vector<ChatMessage>& messages, size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") add(out, "<|im_start|>user", true);
  add(out, "\n<tool_response>\n", true);
  add(out, messages[i].content, false);
  add(out, "\n</tool_response>", true);
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") add(out, "<|im_end|>\n", true);
}

Result<std::vector<ChatSegment>> render_hermes(const std::string& default_system,
                                               const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                               const std::vector<Tool>& tools) {
  std::vector<ChatSegment> out;
  if (Status s = system_turn(out, default_system, messages, tools); !s.ok()) return s.error();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i, true); !s.ok()) return s.error();
    if (i == 0 && m.role == "system") continue;  // written by system_turn
    if (m.role == "tool") {
      add_tool_response(out, messages, i);
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      if (Status s = assistant_calls(out, m, i); !s.ok()) return s.error();
    } else {
      add(out, "<|im_start|>" + m.role + "\n", true);
      add(out, m.content, false);
      add(out, "<|im_end|>\n", true);
    }
  }
  if (add_generation_prompt) add(out, "<|im_start|>assistant\n", true);
  return out;
}

}  // namespace hearth::tok
