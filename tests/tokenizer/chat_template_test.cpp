// Chat template detection and native rendering. Expected strings follow the reference
// Jinja templates (Gemma 3's tokenizer_config.json, ChatML, Meta Llama 3).
#include "engine/tokenizer/chat_template.h"

#include <catch2/catch.hpp>

#include "engine/gguf/gguf.h"
#include "test_util.h"

using hearth::ChatFamily;
using hearth::ChatMessage;
using hearth::render_chat;

TEST_CASE("chat families are recognised from their template sources") {
  const char* gemma =
      "{{ bos_token }}{%- for message in loop_messages -%}{{ '<start_of_turn>' + role + '\\n' "
      "}}{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}";
  const char* chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
  const char* llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
      "message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}";
  CHECK(hearth::detect_chat_template(gemma).value().family == ChatFamily::Gemma);
  CHECK(hearth::detect_chat_template(chatml).value().family == ChatFamily::ChatML);
  CHECK(hearth::detect_chat_template(llama3).value().family == ChatFamily::Llama3);

  auto unknown = hearth::detect_chat_template("{% for m in messages %}[INST] {{ m.content }}");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("unsupported chat template") != std::string::npos);
  CHECK(unknown.error().message.find("[INST]") != std::string::npos);
}

TEST_CASE("gemma folds the system message into the first user turn and trims contents") {
  std::vector<ChatMessage> msgs{{"system", "Be brief."}, {"user", "  Hi!\n"}, {"assistant", "Hello."}, {"user", "Bye"}};
  auto r = render_chat(ChatFamily::Gemma, msgs, true);
  REQUIRE(r.ok());
  CHECK(hearth::join_segments(*r) ==
        "<bos><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n");
  // Message contents are never markup; the template's own text is.
  for (const auto& s : *r) {
    bool content = s.text == "Be brief.\n\nHi!" || s.text == "Hello." || s.text == "Bye";
    CHECK(s.markup == !content);
  }
  auto no_prompt = render_chat(ChatFamily::Gemma, {{"user", "x"}}, false);
  REQUIRE(no_prompt.ok());
  CHECK(hearth::join_segments(*no_prompt) == "<bos><start_of_turn>user\nx<end_of_turn>\n");
}

TEST_CASE("gemma requires alternating user and assistant turns") {
  auto two_users = render_chat(ChatFamily::Gemma, {{"user", "a"}, {"user", "b"}}, true);
  CHECK_FALSE(two_users.ok());
  auto late_system = render_chat(ChatFamily::Gemma, {{"user", "a"}, {"system", "b"}}, true);
  CHECK_FALSE(late_system.ok());
  auto assistant_first = render_chat(ChatFamily::Gemma, {{"assistant", "a"}}, true);
  CHECK_FALSE(assistant_first.ok());
}

TEST_CASE("chatml and llama-3 render their turn markup") {
  std::vector<ChatMessage> msgs{{"system", "S"}, {"user", " U "}, {"assistant", "A"}};
  auto chatml = render_chat(ChatFamily::ChatML, msgs, true);
  REQUIRE(chatml.ok());
  CHECK(hearth::join_segments(*chatml) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U <|im_end|>\n"
        "<|im_start|>assistant\nA<|im_end|>\n<|im_start|>assistant\n");
  auto llama3 = render_chat(ChatFamily::Llama3, msgs, true);
  REQUIRE(llama3.ok());
  CHECK(hearth::join_segments(*llama3) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("unknown roles are errors in every family") {
  for (ChatFamily f : {ChatFamily::Gemma, ChatFamily::ChatML, ChatFamily::Llama3}) {
    auto r = render_chat(f, {{"tool", "x"}}, false);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("tool") != std::string::npos);
  }
}

TEST_CASE("A Gemma model without tokenizer.chat_template gets Gemma's turn format") {
  const std::string path = hearth::test::gemma_model_path();
  if (path.empty()) {
    WARN("default model not installed; skipped");
    return;
  }
  auto file = hearth::gguf::File::open(path);
  REQUIRE(file.ok());
  REQUIRE_FALSE((*file)->has("tokenizer.chat_template"));
  auto fam = hearth::chat_template_from_gguf(**file);
  REQUIRE(fam.ok());
  REQUIRE(fam->family == hearth::ChatFamily::Gemma);
}
