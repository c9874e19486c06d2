// Chat templates rendered natively (no Jinja): the model's tokenizer.chat_template is only
// inspected to tell which family it belongs to. Rendering yields segments so that the
// tokenizer can recognise special tokens in template markup but never in what users wrote.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth {
namespace gguf {
class File;
}

enum class ChatFamily { Gemma, ChatML, Llama3 };

const char* chat_family_name(ChatFamily f);  // "gemma", "chatml", "llama-3"

// Recognises a family by the special tokens its Jinja source writes: <start_of_turn> (Gemma),
// <|im_start|> (ChatML), <|start_header_id|> (Llama 3). Anything else is an error.
Result<ChatFamily> detect_chat_family(std::string_view jinja_source);
// From the model's tokenizer.chat_template; when the key is absent, Gemma for the Gemma
// architectures and an error otherwise.
Result<ChatFamily> chat_family_from_gguf(const gguf::File& f);

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

struct ChatSegment {
  std::string text;
  bool markup;  // written by the template: may contain special tokens
};

// The prompt as the family's reference template renders it, BOS included where the template
// writes one (<bos>, <|begin_of_text|>):
//  Gemma:  <bos><start_of_turn>user\n{system}\n\n{user|trim}<end_of_turn>\n
//          <start_of_turn>model\n{assistant|trim}<end_of_turn>\n ... [<start_of_turn>model\n]
//          system only as the first message; then user/assistant must alternate, user first.
//  ChatML: <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//  Llama3: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}
//          <|eot_id|> ... [<|start_header_id|>assistant<|end_header_id|>\n\n]
// Unknown roles and (Gemma) broken alternation are errors.
Result<std::vector<ChatSegment>> render_chat(ChatFamily family,
                                             const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt);

// The segments joined, for logs and tests.
std::string join_segments(const std::vector<ChatSegment>& segments);

}  // namespace hearth
