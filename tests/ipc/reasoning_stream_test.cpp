// A thinking model's answer through the API layer: the <think> block comes out as Reasoning
// events (reasoning_content on OpenAI's routes), never as content, however the engine's text
// is cut, and tool calls after it still parse. Requests carry chat_template_kwargs'
// enable_thinking and assistant messages' reasoning_content.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tool_calls.h"
#include "ipc/api/openai_request.h"
#include "ipc/api/openai_response.h"
#include "ipc/constraints.h"
#include "ipc/generation.h"

using namespace hearth;
using namespace hearth::ipc;
using json = nlohmann::ordered_json;

namespace {

const char* kQwen3Source = "{%- if enable_thinking is defined and enable_thinking is false %}<|im_start|><think>";

ChatTemplate qwen3() {
  auto t = detect_chat_template(kQwen3Source);
  REQUIRE(t.ok());
  REQUIRE(t->family == ChatFamily::Qwen3);
  return *t;
}

struct Said {
  std::string reasoning, content, calls;  // calls: "name(arguments);" each
  bool operator==(const Said& o) const { return reasoning == o.reasoning && content == o.content && calls == o.calls; }
};

std::ostream& operator<<(std::ostream& os, const Said& s) {
  return os << "{reasoning \"" << s.reasoning << "\", content \"" << s.content << "\", calls \"" << s.calls << "\"}";
}

// The answer's pieces through the request's event stream; reasoning must come first.
Said run(const ApiRequest& request, const std::vector<std::string>& pieces) {
  EventStream events = event_stream(request, qwen3());
  Said said;
  auto take = [&](const std::vector<ApiEvent>& evs) {
    for (const ApiEvent& e : evs) {
      switch (e.kind) {
        case ApiEvent::Kind::Reasoning:
          CHECK(said.content.empty());
          CHECK(said.calls.empty());
          said.reasoning += e.text;
          break;
        case ApiEvent::Kind::Text:
          said.content += e.text;
          break;
        case ApiEvent::Kind::CallBegin:
          said.calls += e.call_name + "(";
          break;
        case ApiEvent::Kind::CallArguments:
          said.calls += e.text;
          break;
        case ApiEvent::Kind::CallEnd:
          said.calls += ");";
          break;
        default:
          break;
      }
    }
  };
  for (const std::string& p : pieces) {
    RequestEvent ev;
    ev.text = p;
    take(events.feed(std::move(ev)));
  }
  RequestEvent fin;
  fin.kind = RequestEvent::Kind::Finished;
  fin.finish_reason = "stop";
  take(events.feed(std::move(fin)));
  return said;
}

void check_any_cut(const ApiRequest& request, const std::string& answer, const Said& expected) {
  INFO("answer: " << answer);
  CHECK(run(request, {answer}) == expected);
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(run(request, {answer.substr(0, cut), answer.substr(cut)}) == expected);
  }
  std::vector<std::string> bytes;
  for (char c : answer) bytes.emplace_back(1, c);
  CHECK(run(request, bytes) == expected);
}

ApiRequest chat() {
  ApiRequest r;
  r.messages = {{"user", "Weather in Lyon?"}};
  return r;
}

ApiRequest with_weather_tool() {
  ApiRequest r = chat();
  r.tools.push_back(Tool{"get_weather", "", R"({"type":"object","properties":{"city":{"type":"string"}}})", false, ""});
  return r;
}

}  // namespace

TEST_CASE("a Qwen3 answer's reasoning block is reasoning, not content, cut at any byte") {
  check_any_cut(chat(), "<think>\nThe user asks about Lyon.\n</think>\n\nIt is sunny in Lyon.",
                {"The user asks about Lyon.", "It is sunny in Lyon.", ""});
  check_any_cut(chat(), "<think>\n\n</think>\n\nSunny.", {"", "Sunny.", ""});
  check_any_cut(chat(), "Sunny, <think> is a tag.", {"", "Sunny, <think> is a tag.", ""});
}

TEST_CASE("a tool call after a reasoning block is a call, cut at any byte") {
  check_any_cut(with_weather_tool(),
                "<think>\nI need the tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                "{\"city\": \"Lyon\"}}\n</tool_call>",
                {"I need the tool.", "", "get_weather({\"city\": \"Lyon\"});"});
  // A call written inside the reasoning is reasoning: the model is thinking about it.
  check_any_cut(
      with_weather_tool(),
      "<think>\nMaybe <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\n</think>\n\n"
      "Let me check.",
      {"Maybe <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", "Let me check.", ""});
}

TEST_CASE("completions and templates without a reasoning block leave <think> in the content") {
  ApiRequest completion = chat();
  completion.chat = false;
  EventStream events = event_stream(completion, qwen3());
  RequestEvent ev;
  ev.text = "<think>x</think>y";
  const auto out = events.feed(ev);
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == ApiEvent::Kind::Text);
  CHECK(out[0].text == "<think>x</think>y");

  EventStream chatml = event_stream(chat(), ChatTemplate(ChatFamily::ChatML));
  const auto plain = chatml.feed(ev);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].kind == ApiEvent::Kind::Text);
}

TEST_CASE("OpenAI's answer carries the reasoning as reasoning_content, whole and streamed") {
  ApiEvent reasoning;
  reasoning.kind = ApiEvent::Kind::Reasoning;
  reasoning.text = "Lyon is in France.";
  ApiEvent text;
  text.text = "Sunny.";
  ApiEvent done;
  done.kind = ApiEvent::Kind::Done;
  done.finish_reason = "stop";

  auto whole = openai_writer(new_response_meta(Endpoint::Chat, "m", false), false);
  for (const ApiEvent& e : {reasoning, text, done}) CHECK(whole->write(e).empty());
  const json body = json::parse(whole->response().body);
  const json& message = body.at("choices")[0].at("message");
  CHECK(message.at("content") == "Sunny.");
  CHECK(message.at("reasoning_content") == "Lyon is in France.");

  auto streamed = openai_writer(new_response_meta(Endpoint::Chat, "m", false), true);
  const std::string sse = streamed->write(reasoning);
  REQUIRE(sse.rfind("data: ", 0) == 0);
  const json chunk = json::parse(sse.substr(6));
  CHECK(chunk.at("choices")[0].at("delta") == json{{"reasoning_content", "Lyon is in France."}});
  const json content = json::parse(streamed->write(text).substr(6));
  CHECK(content.at("choices")[0].at("delta") == json{{"content", "Sunny."}});

  // An answer without reasoning has no reasoning_content.
  auto plain = openai_writer(new_response_meta(Endpoint::Chat, "m", false), false);
  plain->write(text);
  plain->write(done);
  CHECK_FALSE(json::parse(plain->response().body).at("choices")[0].at("message").contains("reasoning_content"));
}

TEST_CASE("chat_template_kwargs.enable_thinking and reasoning_content are read as llama-server reads them") {
  const auto body = nlohmann::json::parse(R"({"messages":[{"role":"user","content":"2+2?"},
      {"role":"assistant","content":"4","reasoning_content":"Two and two."},
      {"role":"assistant","content":null,"reasoning_content":"Only thought."},
      {"role":"user","content":"Times 3?"}],
      "chat_template_kwargs":{"enable_thinking":false,"other":[1]}})");
  auto parsed = parse_openai_request(Endpoint::Chat, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  CHECK_FALSE(r.chat_options.enable_thinking);
  CHECK(r.messages[1].reasoning_content == std::optional<std::string>("Two and two."));
  CHECK(r.messages[2].reasoning_content == std::optional<std::string>("Only thought."));
  CHECK_FALSE(r.messages[0].reasoning_content.has_value());

  auto absent = parse_openai_request(Endpoint::Chat,
                                     nlohmann::json::parse(R"({"messages":[{"role":"user","content":"x"}]})"), "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(absent));
  CHECK(std::get<OpenAiRequest>(absent).chat_options.enable_thinking);

  for (const char* bad : {R"("yes")", R"({"enable_thinking":"false"})", R"({"enable_thinking":0})"}) {
    INFO(bad);
    nlohmann::json b = nlohmann::json::parse(R"({"messages":[{"role":"user","content":"x"}]})");
    b["chat_template_kwargs"] = nlohmann::json::parse(bad);
    auto e = parse_openai_request(Endpoint::Chat, b, "m");
    REQUIRE(std::holds_alternative<ApiError>(e));
    CHECK(std::get<ApiError>(e).param.rfind("chat_template_kwargs", 0) == 0);
  }
  nlohmann::json b = body;
  b["messages"][1]["reasoning_content"] = 5;
  auto e = parse_openai_request(Endpoint::Chat, b, "m");
  REQUIRE(std::holds_alternative<ApiError>(e));
  CHECK(std::get<ApiError>(e).param == "messages[1].reasoning_content");
}
