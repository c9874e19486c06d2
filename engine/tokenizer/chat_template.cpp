#include "engine/tokenizer/chat_template.h"

#include "engine/gguf/gguf.h"

namespace hearth {
namespace {

// Jinja's `trim` (Python str.strip() on ASCII whitespace).
std::string trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

Status check_role(const ChatMessage& m, size_t i) {
  if (m.role == "system" || m.role == "user" || m.role == "assistant") return {};
  return make_error("chat message " + std::to_string(i) + " has role '" + m.role +
                    "'; expected system, user or assistant");
}

// Gemma 3's template: system content + "\n\n" opens the first user turn; turns alternate
// user/model starting with user; contents are trimmed.
Result<std::vector<ChatSegment>> render_gemma(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) {
  std::vector<ChatSegment> out{{"<bos>", true}};
  size_t first = 0;
  std::string prefix;
  if (!messages.empty() && messages[0].role == "system") {
    prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i); !s.ok()) return s.error();
    bool want_user = (i - first) % 2 == 0;
    if ((m.role == "user") != want_user || m.role == "system") {
      return make_error("gemma chat: message " + std::to_string(i) + " has role '" + m.role +
                        "'; roles must alternate user/assistant/user/... after an optional "
                        "first system message");
    }
    const char* role = m.role == "assistant" ? "model" : "user";
    out.push_back({std::string("<start_of_turn>") + role + "\n", true});
    std::string content = (i == first ? prefix : std::string()) + trim(m.content);
    if (!content.empty()) out.push_back({std::move(content), false});
    out.push_back({"<end_of_turn>\n", true});
  }
  if (add_generation_prompt) out.push_back({"<start_of_turn>model\n", true});
  return out;
}

Result<std::vector<ChatSegment>> render_chatml(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt) {
  std::vector<ChatSegment> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i); !s.ok()) return s.error();
    out.push_back({"<|im_start|>" + m.role + "\n", true});
    if (!m.content.empty()) out.push_back({m.content, false});
    out.push_back({"<|im_end|>\n", true});
  }
  if (add_generation_prompt) out.push_back({"<|im_start|>assistant\n", true});
  return out;
}

Result<std::vector<ChatSegment>> render_llama3(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt) {
  std::vector<ChatSegment> out{{"<|begin_of_text|>", true}};
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (Status s = check_role(m, i); !s.ok()) return s.error();
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

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::Gemma: return "gemma";
    case ChatFamily::ChatML: return "chatml";
    case ChatFamily::Llama3: return "llama-3";
  }
  return "?";
}

Result<ChatFamily> detect_chat_family(std::string_view src) {
  if (src.find("<start_of_turn>") != std::string_view::npos) return ChatFamily::Gemma;
  if (src.find("<|start_header_id|>") != std::string_view::npos) return ChatFamily::Llama3;
  if (src.find("<|im_start|>") != std::string_view::npos) return ChatFamily::ChatML;
  std::string head(src.substr(0, 60));
  for (char& c : head) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return make_error("unsupported chat template: found none of <start_of_turn> (gemma), "
                    "<|im_start|> (chatml) or <|start_header_id|> (llama-3) in \"" + head +
                    (src.size() > 60 ? "...\"" : "\""));
}

Result<ChatFamily> chat_family_from_gguf(const gguf::File& f) {
  if (!f.has("tokenizer.chat_template")) {
    // Some conversions (the default Gemma 3 270M file among them) carry no template; a
    // Gemma architecture implies Gemma's turn format.
    auto arch = f.get_string("general.architecture");
    if (arch.ok() && (*arch == "gemma3" || *arch == "gemma2" || *arch == "gemma")) return ChatFamily::Gemma;
    return make_error("the model has no chat template (tokenizer.chat_template is absent) and its "
                      "architecture implies none");
  }
  auto src = f.get_string("tokenizer.chat_template");
  if (!src.ok()) return src.error();
  return detect_chat_family(*src);
}

Result<std::vector<ChatSegment>> render_chat(ChatFamily family,
                                             const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt) {
  switch (family) {
    case ChatFamily::Gemma: return render_gemma(messages, add_generation_prompt);
    case ChatFamily::ChatML: return render_chatml(messages, add_generation_prompt);
    case ChatFamily::Llama3: return render_llama3(messages, add_generation_prompt);
  }
  return make_error("unknown chat family");
}

std::string join_segments(const std::vector<ChatSegment>& segments) {
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

}  // namespace hearth
