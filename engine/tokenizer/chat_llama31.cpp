// Meta's Llama 3.1 chat template (Llama-3.1-8B-Instruct's tokenizer_config.json; the fixture
// generator tests/reference/make_chat_template_fixtures.py holds a copy): a dated system
// header, custom tools described in the first user message, one JSON call per assistant turn,
// results in the ipython role. Its builtin tools (brave_search, wolfram_alpha,
// code_interpreter: "Tools: ..." in the header, <|python_tag|> calls, <|eom_id|>) are not
// OpenAI functions, and hearth never passes them.
#include "engine/tokenizer/chat_render.h"
#include "engine/tokenizer/python_json.h"

namespace hearth::tok {
namespace {

constexpr const char* kToolsIntro =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt.\n\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
    "value}.Do not use variables.\n\n";

constexpr const char* kDefaultDate = "26 Jul 2024";  // Llama 3.1's template, when date_string is unset

std::string header(const std::string& role) {
  return "<|start_header_id|>" + role + "<|end_header_id|>\n\n";
}

// The user turn that carries the tools, made of the first message after the system one.
Status tools_turn(std::vector<ChatSegment>& out, const ChatMessage& m, const std::vector<Tool>& tools) {
  add(out, header("user") + kToolsIntro, true);
  for (const Tool& tool : tools) {
    Result<std::string> json = tool_json(tool, 4);
    if (!json.ok()) return json.error();
    add(out, std::move(*json), false);
    add(out, "\n\n", true);
  }
  add(out, trim(m.content), false);
  add(out, "<|eot_id|>", true);
  return {};
}

Status message_turn(std::vector<ChatSegment>& out, const ChatMessage& m, size_t i) {
  if (!m.tool_calls.empty()) {
    if (m.tool_calls.size() != 1) {
      return make_error("chat message " + std::to_string(i) + " has " + std::to_string(m.tool_calls.size()) +
                        " tool calls; Llama 3.1's chat template takes one call per assistant message");
    }
    const ToolCall& call = m.tool_calls[0];
    Result<std::string> args = arguments_json(call, i);
    if (!args.ok()) return args.error();
    add(out, header("assistant") + "{\"name\": \"", true);
    add(out, call.name, false);
    add(out, "\", \"parameters\": ", true);
    add(out, std::move(*args), false);
    add(out, "}<|eot_id|>", true);
  } else if (m.role == "tool") {
    add(out, header("ipython"), true);
    add(out, python_json_string(m.content), false);
    add(out, "<|eot_id|>", true);
  } else {
    add(out, header(m.role), true);
    add(out, trim(m.content), false);
    add(out, "<|eot_id|>", true);
  }
  return {};
}

}  // namespace

Result<std::vector<ChatSegment>> render_llama31(const std::string& date_string,
                                                const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                const std::vector<Tool>& tools) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (Status s = check_role(messages[i], i, true); !s.ok()) return s.error();
  }
  std::vector<ChatSegment> out{{"<|begin_of_text|>", true}};
  size_t next = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = trim(messages[0].content);
    next = 1;
  }
  add(out,
      header("system") + (tools.empty() ? "" : "Environment: ipython\n") +
          "Cutting Knowledge Date: December 2023\nToday Date: " + (date_string.empty() ? kDefaultDate : date_string) +
          "\n\n",
      true);
  add(out, std::move(system), false);
  add(out, "<|eot_id|>", true);
  if (!tools.empty()) {
    if (next == messages.size()) {
      return make_error(
          "Llama 3.1's chat template puts the tools in the first user message, and the conversation has none");
    }
    if (Status s = tools_turn(out, messages[next], tools); !s.ok()) return s.error();
    ++next;
  }
  for (size_t i = next; i < messages.size(); ++i) {
    if (Status s = message_turn(out, messages[i], i); !s.ok()) return s.error();
  }
  if (add_generation_prompt) add(out, header("assistant"), true);
  return out;
}

}  // namespace hearth::tok
