#include "engine/tokenizer/chat_render.h"

#include "engine/tokenizer/python_json.h"

namespace hearth::tok {

std::string trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

Status check_role(const ChatMessage& m, size_t i, bool tool_role) {
  if (m.role == "system" || m.role == "user" || m.role == "assistant") return {};
  if (tool_role && m.role == "tool") return {};
  return make_error("chat message " + std::to_string(i) + " has role '" + m.role + "'; expected system, user, " +
                    (tool_role ? "assistant or tool" : "or assistant"));
}

Result<std::string> tool_json(const Tool& tool, int indent) {
  std::string text = tool.json;
  if (text.empty()) {
    // A tool built in code rather than parsed from a request: the object OpenAI clients send.
    text = R"({"type": "function", "function": {"name": )" + python_json_string(tool.name);
    if (!tool.description.empty()) text += ", \"description\": " + python_json_string(tool.description);
    if (!tool.parameters.empty()) text += ", \"parameters\": " + tool.parameters;
    text += "}}";
  }
  Result<std::string> out = python_json_dumps(text, indent);
  if (!out.ok()) return make_error("tool '" + tool.name + "': " + out.error().message);
  return out;
}

void add(std::vector<ChatSegment>& out, std::string text, bool markup) {
  if (!text.empty()) out.push_back({std::move(text), markup});
}

Result<std::string> arguments_json(const ToolCall& call, size_t message_index) {
  if (trim(call.arguments).empty()) return std::string("{}");
  Result<std::string> out = python_json_dumps(call.arguments);
  if (!out.ok()) {
    return make_error("chat message " + std::to_string(message_index) + ": the arguments of the call to '" + call.name +
                      "' are not JSON (" + out.error().message + ")");
  }
  return out;
}

}  // namespace hearth::tok
