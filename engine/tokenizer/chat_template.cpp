#include "engine/tokenizer/chat_template.h"

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_render.h"

namespace hearth {
namespace {

using tok::check_role;
using tok::trim;

constexpr const char* kOverrideHint =
    "name the model's turn format with --chat-template chatml|gemma|llama3|qwen3 "
    "(HEARTH_CHAT_TEMPLATE, chat_template in hearthd.toml)";

// The value of the Jinja string literal opening at src[q] (' or "), with Jinja's escapes
// (\n \t \r \\ \' \") undone; *end = the index after the closing quote, or npos.
std::string jinja_literal(std::string_view src, size_t q, size_t* end) {
  const char quote = src[q];
  std::string out;
  for (size_t i = q + 1; i < src.size(); ++i) {
    char c = src[i];
    if (c == quote) {
      *end = i + 1;
      return out;
    }
    if (c == '\\' && i + 1 < src.size()) {
      char e = src[++i];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        default:
          out += '\\', out += e;
          break;
      }
      continue;
    }
    out += c;
  }
  *end = std::string_view::npos;
  return {};
}

// The system text a ChatML template writes by itself: the first string literal inside a
// Jinja tag ({{ }} or {% %}) whose value is "<|im_start|>system\n{TEXT}<|im_end|>..." with a
// non-empty TEXT. Qwen2.5 and SmolLM2 write their default system turn as one such literal.
std::string chatml_default_system(std::string_view src) {
  constexpr std::string_view kOpen = "<|im_start|>system\n", kClose = "<|im_end|>";
  size_t pos = 0;
  while (true) {
    size_t tag = src.find('{', pos);
    if (tag == std::string_view::npos || tag + 1 >= src.size()) return {};
    char kind = src[tag + 1];
    if (kind != '{' && kind != '%') {
      pos = tag + 1;
      continue;
    }
    const std::string_view closer = kind == '{' ? "}}" : "%}";
    size_t i = tag + 2;
    size_t tag_end = std::string_view::npos;
    while (i < src.size()) {
      if (src[i] == '\'' || src[i] == '"') {
        size_t end = 0;
        std::string lit = jinja_literal(src, i, &end);
        if (end == std::string_view::npos) return {};
        if (lit.compare(0, kOpen.size(), kOpen) == 0) {
          size_t close = lit.find(kClose, kOpen.size());
          if (close != std::string::npos && close > kOpen.size()) {
            return lit.substr(kOpen.size(), close - kOpen.size());
          }
        }
        i = end;
        continue;
      }
      if (src.compare(i, 2, closer) == 0) {
        tag_end = i + 2;
        break;
      }
      ++i;
    }
    if (tag_end == std::string_view::npos) return {};
    pos = tag_end;
  }
}

// Llama 3.1's default date: the first string literal assigned to date_string in the source
// (`{%- set date_string = "26 Jul 2024" %}`); the 3.1 template's own when there is none.
std::string llama31_date_string(std::string_view src) {
  constexpr std::string_view kSet = "date_string =";
  for (size_t at = src.find(kSet); at != std::string_view::npos; at = src.find(kSet, at + 1)) {
    size_t q = src.find_first_not_of(" \t", at + kSet.size());
    if (q == std::string_view::npos || (src[q] != '"' && src[q] != '\'')) continue;
    size_t end = 0;
    std::string date = jinja_literal(src, q, &end);
    if (end != std::string_view::npos && !date.empty()) return date;
  }
  return "26 Jul 2024";
}

// Whether a conversation needs a tool syntax to be written.
bool uses_tools(const std::vector<ChatMessage>& messages, const std::vector<Tool>& tools) {
  if (!tools.empty()) return true;
  for (const ChatMessage& m : messages) {
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  }
  return false;
}

// Gemma 3's template: system content + "\n\n" opens the first user turn; turns alternate
// user/model starting with user; contents are trimmed.
Result<std::vector<ChatSegment>> render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::vector<ChatSegment> out{{"<bos>", true}};
  size_t first = 0;
  std::string prefix;
  if (!messages.empty() && messages[0].role == "system") {
    const ChatMessage& sys = messages[0];
    prefix = (sys.parts.empty() ? sys.content : sys.parts[0]) + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i, false); !s.ok()) return s.error();
    bool want_user = (i - first) % 2 == 0;
    if ((m.role == "user") != want_user || m.role == "system") {
      return make_error("gemma chat: message " + std::to_string(i) + " has role '" + m.role +
                        "'; roles must alternate user/assistant/user/... after an optional "
                        "first system message");
    }
    const char* role = m.role == "assistant" ? "model" : "user";
    out.push_back({std::string("<start_of_turn>") + role + "\n", true});
    std::string content = i == first ? prefix : std::string();
    if (m.parts.empty()) {
      content += trim(m.content);
    } else {
      for (const std::string& part : m.parts) content += trim(part);
    }
    if (!content.empty()) out.push_back({std::move(content), false});
    out.push_back({"<end_of_turn>\n", true});
  }
  if (add_generation_prompt) out.push_back({"<start_of_turn>model\n", true});
  return out;
}

Result<std::vector<ChatSegment>> render_chatml(const std::string& default_system,
                                               const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::vector<ChatSegment> out;
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system")) {
    out.push_back({"<|im_start|>system\n", true});
    out.push_back({default_system, false});
    out.push_back({"<|im_end|>\n", true});
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i, false); !s.ok()) return s.error();
    out.push_back({"<|im_start|>" + m.role + "\n", true});
    if (!m.content.empty()) out.push_back({m.content, false});
    out.push_back({"<|im_end|>\n", true});
  }
  if (add_generation_prompt) out.push_back({"<|im_start|>assistant\n", true});
  return out;
}

Result<std::vector<ChatSegment>> render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::vector<ChatSegment> out{{"<|begin_of_text|>", true}};
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i, false); !s.ok()) return s.error();
    out.push_back({"<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", true});
    std::string content = trim(m.content);
    if (!content.empty()) out.push_back({std::move(content), false});
    out.push_back({"<|eot_id|>", true});
  }
  if (add_generation_prompt) {
    out.push_back({"<|start_header_id|>assistant<|end_header_id|>\n\n", true});
  }
  return out;
}

}  // namespace

const char* tool_syntax_name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::None:
      return "none";
    case ToolSyntax::Hermes:
      return "hermes";
    case ToolSyntax::Llama31:
      return "llama-3.1";
  }
  return "?";
}

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::Gemma:
      return "gemma";
    case ChatFamily::ChatML:
      return "chatml";
    case ChatFamily::Llama3:
      return "llama-3";
    case ChatFamily::Qwen3:
      return "qwen3";
  }
  return "?";
}

bool chat_family_thinks(ChatFamily f) {
  return f == ChatFamily::Qwen3;
}

Result<ChatTemplate> detect_chat_template(std::string_view src) {
  ChatTemplate t;
  if (src.find("<start_of_turn>") != std::string_view::npos) {
    t.family = ChatFamily::Gemma;
  } else if (src.find("<|start_header_id|>") != std::string_view::npos) {
    t.family = ChatFamily::Llama3;
    if (src.find("Cutting Knowledge Date") != std::string_view::npos ||
        src.find("Environment: ipython") != std::string_view::npos ||
        src.find("<|python_tag|>") != std::string_view::npos) {
      t.tool_syntax = ToolSyntax::Llama31;
      t.date_string = llama31_date_string(src);
    }
  } else if (src.find("<|im_start|>") != std::string_view::npos && src.find("<think>") != std::string_view::npos &&
             src.find("enable_thinking") != std::string_view::npos) {
    t.family = ChatFamily::Qwen3;  // writes its own turns, default system prompt none
    t.tool_syntax = ToolSyntax::Hermes;
  } else if (src.find("<|im_start|>") != std::string_view::npos) {
    t.family = ChatFamily::ChatML;
    t.default_system = chatml_default_system(src);
    if (src.find("<tool_call>") != std::string_view::npos) t.tool_syntax = ToolSyntax::Hermes;
  } else {
    std::string head(src.substr(0, 60));
    for (char& c : head) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return make_error(
        "unsupported chat template: found none of <start_of_turn> (gemma), "
        "<|im_start|> (chatml) or <|start_header_id|> (llama-3) in \"" +
        head + (src.size() > 60 ? "...\"" : "\"") + "; " + kOverrideHint);
  }
  return t;
}

Result<ChatTemplate> chat_template_from_gguf(const gguf::File& f) {
  if (!f.has("tokenizer.chat_template")) {
    // Some conversions (the Gemma 3 270M file among them) carry no template; a Gemma
    // architecture implies Gemma's turn format.
    auto arch = f.get_string("general.architecture");
    if (arch.ok() && (*arch == "gemma3" || *arch == "gemma2" || *arch == "gemma")) {
      return ChatTemplate(ChatFamily::Gemma);
    }
    return make_error(std::string("the model has no chat template (tokenizer.chat_template is "
                                  "absent) and its architecture implies none; ") +
                      kOverrideHint);
  }
  auto src = f.get_string("tokenizer.chat_template");
  if (!src.ok()) return src.error();
  return detect_chat_template(*src);
}

Result<ChatTemplate> chat_template_from_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate(ChatFamily::ChatML);
  if (name == "qwen3") {  // a name that says which model family, tool prompts included
    ChatTemplate t(ChatFamily::Qwen3);
    t.tool_syntax = ToolSyntax::Hermes;
    return t;
  }
  if (name == "gemma") return ChatTemplate(ChatFamily::Gemma);
  if (name == "llama3" || name == "llama-3") return ChatTemplate(ChatFamily::Llama3);
  return make_error("unknown chat template '" + std::string(name) +
                    "'; --chat-template takes chatml, gemma, llama3 or qwen3");
}

Result<ChatTemplate> chat_template_for_model(const gguf::File& f, std::string_view name) {
  if (!name.empty()) return chat_template_from_name(name);
  return chat_template_from_gguf(f);
}

ChatMessage message_from_parts(std::string role, std::vector<std::string> parts) {
  ChatMessage m;
  m.role = std::move(role);
  for (const std::string& p : parts) {
    if (!m.content.empty()) m.content += '\n';
    m.content += p;
  }
  m.parts = std::move(parts);
  return m;
}

Result<std::vector<ChatSegment>> render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt, const std::vector<Tool>& tools,
                                             const ChatOptions& options) {
  if (tmpl.family == ChatFamily::Qwen3)
    return tok::render_qwen3(messages, add_generation_prompt, tools, options.enable_thinking);
  if (tmpl.tool_syntax == ToolSyntax::Hermes && tmpl.family == ChatFamily::ChatML) {
    return tok::render_hermes(tmpl.default_system, messages, add_generation_prompt, tools);
  }
  if (tmpl.tool_syntax == ToolSyntax::Llama31 && tmpl.family == ChatFamily::Llama3) {
    return tok::render_llama31(tmpl.date_string, messages, add_generation_prompt, tools);
  }
  if (uses_tools(messages, tools)) {
    return make_error(std::string("the model's chat template (") + chat_family_name(tmpl.family) +
                      ") has no tool-call syntax: it cannot be given tools, tool calls or tool results");
  }
  switch (tmpl.family) {
    case ChatFamily::Gemma:
      return render_gemma(messages, add_generation_prompt);
    case ChatFamily::ChatML:
      return render_chatml(tmpl.default_system, messages, add_generation_prompt);
    case ChatFamily::Llama3:
      return render_llama3(messages, add_generation_prompt);
    case ChatFamily::Qwen3:
      break;  // rendered above
  }
  return make_error("unknown chat family");
}

std::string join_segments(const std::vector<ChatSegment>& segments) {
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

}  // namespace hearth
