// Qwen3's chat template (Qwen/Qwen3-*'s tokenizer_config.json; the one in
// tests/fixtures/chat_templates.json): ChatML with Hermes tool calls like Qwen2.5's, but no
// default system turn, and a reasoning block (<think>...</think>) that the template keeps only
// in the assistant turns after the last user query (the current tool-calling loop) and drops
// from earlier ones; with enable_thinking false the generation prompt carries an empty block,
// which tells the model to answer at once.
#include "engine/tokenizer/chat_render.h"

namespace hearth::tok {
namespace {

constexpr const char* kToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";

std::string_view lstrip_newlines(std::string_view s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

std::string_view rstrip_newlines(std::string_view s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}

Status system_turn(std::vector<ChatSegment>& out, const std::vector<ChatMessage>& messages,
                   const std::vector<Tool>& tools) {
  const bool first_system = !messages.empty() && messages[0].role == "system";
  if (tools.empty()) {
    if (!first_system) return {};
    add(out, "<|im_start|>system\n", true);
    add(out, messages[0].content, false);
    add(out, "<|im_end|>\n", true);
    return {};
  }
  add(out, "<|im_start|>system\n", true);
  if (first_system) {
    add(out, messages[0].content, false);
    add(out, "\n\n", true);
  }
  add(out, kToolsHead, true);
  return add_hermes_tools(out, tools);
}

// The last user message that is a query, not tool results wrapped as the template writes
// them; the last message's index when there is none.
size_t last_query_index(const std::vector<ChatMessage>& messages) {
  constexpr std::string_view kOpen = "<tool_response>", kClose = "</tool_response>";
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool wrapped = c.size() >= kOpen.size() && c.compare(0, kOpen.size(), kOpen) == 0 &&
                         c.size() >= kClose.size() && c.compare(c.size() - kClose.size(), kClose.size(), kClose) == 0;
    if (messages[i].role == "user" && !wrapped) return i;
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

Status assistant_turn(std::vector<ChatSegment>& out, const ChatMessage& m, size_t i, bool keep_reasoning, bool last) {
  std::string_view content = m.content, reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
    // The reasoning the model wrote into its content: before the first </think>, after the
    // last <think> there; the content after the last </think>.
    std::string_view before = rstrip_newlines(content.substr(0, close));
    const size_t open = before.rfind("<think>");
    if (open != std::string_view::npos) before = before.substr(open + 7);
    reasoning = lstrip_newlines(before);
    content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
  }
  if (keep_reasoning && (last || !reasoning.empty())) {
    add(out, "<|im_start|>assistant\n<think>\n", true);
    add(out, std::string(lstrip_newlines(rstrip_newlines(reasoning))), false);
    add(out, "\n</think>\n\n", true);
    add(out, std::string(lstrip_newlines(content)), false);
  } else {
    add(out, "<|im_start|>assistant\n", true);
    add(out, std::string(content), false);
  }
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    if (k > 0 || !content.empty()) add(out, "\n", true);
    if (Status s = add_hermes_call(out, m.tool_calls[k], i); !s.ok()) return s;
  }
  add(out, "<|im_end|>\n", true);
  return {};
}

}  // namespace

Result<std::vector<ChatSegment>> render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const std::vector<Tool>& tools, bool enable_thinking) {
  std::vector<ChatSegment> out;
  if (Status s = system_turn(out, messages, tools); !s.ok()) return s.error();
  const size_t last_query = last_query_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i, true); !s.ok()) return s.error();
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      add(out, "<|im_start|>" + m.role + "\n", true);
      add(out, m.content, false);
      add(out, "<|im_end|>\n", true);
    } else if (m.role == "assistant") {
      if (Status s = assistant_turn(out, m, i, i > last_query, i + 1 == messages.size()); !s.ok()) return s.error();
    } else if (m.role == "tool") {
      add_tool_response(out, messages, i);
    }
  }
  if (add_generation_prompt) {
    add(out, "<|im_start|>assistant\n", true);
    if (!enable_thinking) add(out, "<think>\n\n</think>\n\n", true);
  }
  return out;
}

}  // namespace hearth::tok
