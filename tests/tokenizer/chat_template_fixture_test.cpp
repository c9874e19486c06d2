// hearth's native chat rendering equals what each model's own Jinja template renders.
// tests/fixtures/chat_templates.json was written by tests/reference/make_chat_template_fixtures.py
// (Python jinja2, outside CI) from the templates in the Qwen2.5-Coder, SmolLM2 and Gemma 3
// files, Meta's Llama 3.1 template and Qwen3's; it stores each template's source, so no model
// file is needed here. Conversations with tools are rendered for the templates with a tool
// syntax; Qwen3's also with reasoning in the history and enable_thinking on and off.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer/chat_template.h"
#include "test_util.h"

using json = nlohmann::json;

namespace {

json load_fixture() {
  const std::string path = hearth::test::source_dir() + "/tests/fixtures/chat_templates.json";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// The messages as the OpenAI route reads them: a string, text parts or null; tool calls with
// their arguments as JSON text; the id a tool result answers.
std::vector<hearth::ChatMessage> messages_of(const json& messages) {
  std::vector<hearth::ChatMessage> out;
  for (const json& m : messages) {
    const std::string role = m.at("role").get<std::string>();
    const json& content = m.at("content");
    if (content.is_array()) {
      std::vector<std::string> parts;
      for (const json& p : content) parts.push_back(p.at("text").get<std::string>());
      out.push_back(hearth::message_from_parts(role, std::move(parts)));
    } else {
      out.push_back({role, content.is_null() ? "" : content.get<std::string>(), {}});
    }
    for (const json& c : m.value("tool_calls", json::array())) {
      const json& f = c.at("function");
      out.back().tool_calls.push_back(
          {c.at("id").get<std::string>(), f.at("name").get<std::string>(), f.at("arguments").get<std::string>()});
    }
    out.back().tool_call_id = m.value("tool_call_id", "");
    if (m.contains("reasoning_content") && !m.at("reasoning_content").is_null())
      out.back().reasoning_content = m.at("reasoning_content").get<std::string>();
  }
  return out;
}

// Tools as the OpenAI route reads them: `json` is the text the client sent.
std::vector<hearth::Tool> tools_of(const json& tools) {
  std::vector<hearth::Tool> out;
  for (const json& text : tools) {
    const json t = json::parse(text.get<std::string>());
    const json& f = t.at("function");
    out.push_back({f.at("name").get<std::string>(), f.value("description", ""), f.at("parameters").dump(),
                   f.value("strict", false), text.get<std::string>()});
  }
  return out;
}

}  // namespace

TEST_CASE("rendered chat prompts equal the Jinja renderings of each model's own template") {
  const json doc = load_fixture();
  REQUIRE(doc.at("models").size() == 5);
  size_t n_tool_cases = 0;
  for (const json& model : doc.at("models")) {
    const std::string name = model.at("name").get<std::string>();
    INFO("model " << name);
    auto tmpl = hearth::detect_chat_template(model.at("chat_template").get<std::string>());
    REQUIRE(tmpl.ok());
    CHECK((tmpl->tool_syntax != hearth::ToolSyntax::None) == model.at("tool_syntax").get<bool>());
    REQUIRE(model.at("cases").size() >= 6);
    for (const json& c : model.at("cases")) {
      INFO("conversation: " << c.at("name").get<std::string>());
      const auto tools = tools_of(c.value("tools", json::array()));
      n_tool_cases += c.contains("tools");
      hearth::ChatOptions options;
      options.enable_thinking = c.value("enable_thinking", true);
      auto segments = hearth::render_chat(*tmpl, messages_of(c.at("messages")),
                                          c.at("add_generation_prompt").get<bool>(), tools, options);
      if (c.contains("error")) {
        // The template refuses this conversation (raise_exception); so does hearth.
        INFO("the template raised: " << c.at("error").get<std::string>());
        CHECK_FALSE(segments.ok());
        continue;
      }
      REQUIRE(segments.ok());
      CHECK(hearth::join_segments(*segments) == c.at("expected").get<std::string>());
    }
  }
  CHECK(n_tool_cases >= 16 + 9 + 4);
}

TEST_CASE("templates without a tool syntax refuse tools, calls and results instead of dropping them") {
  const json doc = load_fixture();
  const json* qwen = nullptr;
  for (const json& model : doc.at("models")) {
    if (model.at("name") == "qwen2.5-coder:0.5b") qwen = &model;
  }
  REQUIRE(qwen != nullptr);
  for (const json& model : doc.at("models")) {
    if (model.at("tool_syntax").get<bool>()) continue;
    const std::string name = model.at("name").get<std::string>();
    auto tmpl = hearth::detect_chat_template(model.at("chat_template").get<std::string>());
    REQUIRE(tmpl.ok());
    for (const json& c : qwen->at("cases")) {
      if (!c.contains("tools")) continue;
      INFO(name << ", conversation: " << c.at("name").get<std::string>());
      auto r = hearth::render_chat(*tmpl, messages_of(c.at("messages")), true, tools_of(c.at("tools")));
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().message.find("has no tool-call syntax") != std::string::npos);
      CHECK(r.error().message.find(hearth::chat_family_name(tmpl->family)) != std::string::npos);
    }
  }
}

TEST_CASE("the ChatML default system prompt is read from the template, not assumed") {
  const json doc = load_fixture();
  for (const json& model : doc.at("models")) {
    const std::string name = model.at("name").get<std::string>();
    auto tmpl = hearth::detect_chat_template(model.at("chat_template").get<std::string>());
    REQUIRE(tmpl.ok());
    if (name == "qwen2.5-coder:0.5b") {
      CHECK(tmpl->family == hearth::ChatFamily::ChatML);
      CHECK(tmpl->default_system == "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    } else if (name == "smollm2:135m") {
      CHECK(tmpl->family == hearth::ChatFamily::ChatML);
      CHECK(tmpl->default_system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    } else if (name == "llama3.1") {
      CHECK(tmpl->family == hearth::ChatFamily::Llama3);
      CHECK(tmpl->tool_syntax == hearth::ToolSyntax::Llama31);
      CHECK(tmpl->date_string == "26 Jul 2024");
    } else if (name == "qwen3") {
      CHECK(tmpl->family == hearth::ChatFamily::Qwen3);
      CHECK(tmpl->tool_syntax == hearth::ToolSyntax::Hermes);
      CHECK(tmpl->default_system.empty());
      CHECK(hearth::chat_family_thinks(tmpl->family));
    } else {
      CHECK(tmpl->family == hearth::ChatFamily::Gemma);
      CHECK(tmpl->default_system.empty());
    }
  }
  // Plain ChatML (no default turn in the source) writes no system turn of its own.
  auto plain = hearth::detect_chat_template(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
  REQUIRE(plain.ok());
  CHECK(plain->default_system.empty());
  auto r = hearth::render_chat(*plain, {{"user", "x", {}}}, true);
  REQUIRE(r.ok());
  CHECK(hearth::join_segments(*r) == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("the default system prompt is plain text, never markup") {
  hearth::ChatTemplate t(hearth::ChatFamily::ChatML);
  t.default_system = "<|im_end|>";
  auto r = hearth::render_chat(t, {{"user", "u", {}}}, false);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 6);
  CHECK((*r)[1].text == "<|im_end|>");
  CHECK_FALSE((*r)[1].markup);
}

TEST_CASE("an unrecognised template is an error that names the --chat-template override") {
  auto r = hearth::detect_chat_template("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("--chat-template chatml|gemma|llama3|qwen3") != std::string::npos);
}

TEST_CASE("the chat template override names chatml, gemma, llama3 or qwen3, and nothing else") {
  CHECK(hearth::chat_template_from_name("chatml").value().family == hearth::ChatFamily::ChatML);
  CHECK(hearth::chat_template_from_name("gemma").value().family == hearth::ChatFamily::Gemma);
  CHECK(hearth::chat_template_from_name("llama3").value().family == hearth::ChatFamily::Llama3);
  CHECK(hearth::chat_template_from_name("qwen3").value().family == hearth::ChatFamily::Qwen3);
  CHECK(hearth::chat_template_from_name("qwen3").value().tool_syntax == hearth::ToolSyntax::Hermes);
  auto bad = hearth::chat_template_from_name("mistral");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("mistral") != std::string::npos);
  CHECK(bad.error().message.find("chatml, gemma, llama3 or qwen3") != std::string::npos);
}
