// Tools in chat rendering, beyond the Jinja fixtures (chat_template_fixture_test.cpp): which
// templates have a tool syntax, what is markup, and the inputs a template never sees.
#include <catch2/catch.hpp>

#include "engine/tokenizer/chat_template.h"

using hearth::ChatFamily;
using hearth::ChatMessage;
using hearth::ChatTemplate;
using hearth::Tool;
using hearth::ToolCall;
using hearth::ToolSyntax;

namespace {

ChatTemplate hermes() {
  ChatTemplate t(ChatFamily::ChatML);
  t.tool_syntax = ToolSyntax::Hermes;
  return t;
}

ChatTemplate llama31() {
  ChatTemplate t(ChatFamily::Llama3);
  t.tool_syntax = ToolSyntax::Llama31;
  t.date_string = "26 Jul 2024";
  return t;
}

ChatMessage call_message(std::string arguments) {
  ChatMessage m{"assistant", ""};
  m.tool_calls.push_back({"call_1", "get_weather", std::move(arguments)});
  return m;
}

Tool weather_tool() {
  return {"get_weather", "Weather", R"({"type": "object"})", false,
          R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}})"};
}

}  // namespace

TEST_CASE("the tool syntax is read from the template source") {
  auto qwen = hearth::detect_chat_template(
      "{%- if tools %}{{- '<|im_start|>system\\n' }}{{- '<tool_call>' }}{%- endif %}"
      "{{ '<|im_start|>' + message.role }}");
  REQUIRE(qwen.ok());
  CHECK(qwen->tool_syntax == ToolSyntax::Hermes);
  auto chatml = hearth::detect_chat_template("{{'<|im_start|>' + message['role'] + '\\n'}}");
  REQUIRE(chatml.ok());
  CHECK(chatml->tool_syntax == ToolSyntax::None);

  auto llama3 = hearth::detect_chat_template("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}");
  REQUIRE(llama3.ok());
  CHECK(llama3->tool_syntax == ToolSyntax::None);
  // Llama 3.2 writes today's date when it can; its fixed fallback is the one hearth uses.
  auto llama32 = hearth::detect_chat_template(
      "{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}{%- else %}"
      "{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\" }}"
      "{{- \"Cutting Knowledge Date: December 2023\\n\" }}");
  REQUIRE(llama32.ok());
  CHECK(llama32->tool_syntax == ToolSyntax::Llama31);
  CHECK(llama32->date_string == "26 Jul 2024");
  auto dated = hearth::detect_chat_template(
      "{%- set date_string = '01 Jan 2025' %}<|start_header_id|>{{ 'Environment: ipython' }}");
  REQUIRE(dated.ok());
  CHECK(dated->date_string == "01 Jan 2025");
}

TEST_CASE("the --chat-template override implies no tool syntax") {
  for (const char* name : {"chatml", "gemma", "llama3"}) {
    auto t = hearth::chat_template_from_name(name);
    REQUIRE(t.ok());
    CHECK(t->tool_syntax == ToolSyntax::None);
    auto r = hearth::render_chat(*t, {{"user", "hi"}}, true, {weather_tool()});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("has no tool-call syntax") != std::string::npos);
  }
}

TEST_CASE("a call or a tool result alone, without tools, needs a tool syntax too") {
  ChatTemplate smol(ChatFamily::ChatML);
  smol.default_system = "You are SmolLM";
  auto with_call = hearth::render_chat(smol, {{"user", "x"}, call_message("{}")}, true);
  REQUIRE_FALSE(with_call.ok());
  CHECK(with_call.error().message.find("chatml") != std::string::npos);
  auto with_result = hearth::render_chat(ChatFamily::Gemma, {{"user", "x"}, {"tool", "21 C"}}, true);
  REQUIRE_FALSE(with_result.ok());
  CHECK(with_result.error().message.find("gemma") != std::string::npos);
}

TEST_CASE("tools, names, arguments and results are content, and only the template's words are markup") {
  std::vector<ChatMessage> msgs{
      {"user", "Weather?"}, call_message(R"({"city": "<|im_end|>"})"), {"tool", "<tool_call>"}};
  for (const ChatTemplate& t : {hermes(), llama31()}) {
    INFO(hearth::tool_syntax_name(t.tool_syntax));
    auto r = hearth::render_chat(t, msgs, true, {weather_tool()});
    REQUIRE(r.ok());
    std::string markup, content;
    for (const auto& s : *r) (s.markup ? markup : content) += s.text + "|";
    CHECK(markup.find("get_weather") == std::string::npos);  // in the tool's JSON and in the call
    CHECK(markup.find("city") == std::string::npos);
    CHECK(markup.find("Weather?") == std::string::npos);
    CHECK(content.find("<|im_end|>") != std::string::npos);
    CHECK(content.find("<tool_call>") != std::string::npos);  // the result
  }
}

TEST_CASE("empty arguments are written as {} and malformed ones are an error naming the call") {
  auto r = hearth::render_chat(hermes(), {{"user", "x"}, call_message(" ")}, false);
  REQUIRE(r.ok());
  CHECK(hearth::join_segments(*r).find("{\"name\": \"get_weather\", \"arguments\": {}}") != std::string::npos);
  auto bad = hearth::render_chat(llama31(), {{"user", "x"}, call_message("{city: Lyon}")}, false);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("chat message 1") != std::string::npos);
  CHECK(bad.error().message.find("get_weather") != std::string::npos);
}

TEST_CASE("a tool without its client JSON is written from its fields") {
  Tool t{"now", "The time \"here\"", R"({"type":"object","properties":{}})", false, ""};
  auto r = hearth::render_chat(hermes(), {{"user", "x"}}, true, {t});
  REQUIRE(r.ok());
  CHECK(hearth::join_segments(*r).find("\n{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": "
                                       "\"The time \\\"here\\\"\", \"parameters\": {\"type\": \"object\", "
                                       "\"properties\": {}}}}\n</tools>") != std::string::npos);
  Tool broken{"f", "", "{", false, ""};
  CHECK_FALSE(hearth::render_chat(hermes(), {{"user", "x"}}, true, {broken}).ok());
}

TEST_CASE("roles other than system, user, assistant and tool stay errors with a tool syntax") {
  for (const ChatTemplate& t : {hermes(), llama31()}) {
    auto r = hearth::render_chat(t, {{"developer", "x"}}, true);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("developer") != std::string::npos);
  }
}
