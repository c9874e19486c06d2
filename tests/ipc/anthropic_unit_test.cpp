// Anthropic's Messages API without sockets: how a request body maps onto the internal
// request (system, turns, tool_use and tool_result blocks, tools, tool_choice, sampling), what
// it refuses, and what the writer makes of an answer's events, whole and streamed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ipc/api/anthropic_request.h"
#include "ipc/api/anthropic_response.h"

using namespace hearth;
using namespace hearth::ipc;
using json = nlohmann::ordered_json;

namespace {

// The body with max_tokens 16 and the given messages (JSON text) added.
json body_with(const std::string& messages, const std::string& extra = "{}") {
  json b = json::parse(extra);
  b["max_tokens"] = 16;
  b["messages"] = json::parse(messages);
  return b;
}

ApiRequest parsed(const json& body, AnthropicPurpose purpose = AnthropicPurpose::Message) {
  std::variant<ApiRequest, ApiError> r = parse_anthropic_request(body, purpose);
  if (auto* e = std::get_if<ApiError>(&r)) FAIL("refused: " << e->message);
  return std::get<ApiRequest>(r);
}

ApiError refused(const json& body, AnthropicPurpose purpose = AnthropicPurpose::Message) {
  std::variant<ApiRequest, ApiError> r = parse_anthropic_request(body, purpose);
  if (std::holds_alternative<ApiRequest>(r)) FAIL("accepted: " << body.dump());
  return std::get<ApiError>(r);
}

ApiEvent text(const std::string& t) {
  ApiEvent e;
  e.text = t;
  return e;
}

ApiEvent call_begin(int index, const std::string& id, const std::string& name) {
  ApiEvent e;
  e.kind = ApiEvent::Kind::CallBegin;
  e.call_index = index;
  e.call_id = id;
  e.call_name = name;
  return e;
}

ApiEvent call_arguments(int index, const std::string& piece) {
  ApiEvent e;
  e.kind = ApiEvent::Kind::CallArguments;
  e.call_index = index;
  e.text = piece;
  return e;
}

ApiEvent call_end(int index) {
  ApiEvent e;
  e.kind = ApiEvent::Kind::CallEnd;
  e.call_index = index;
  return e;
}

ApiEvent done(const std::string& reason, int32_t prompt = 20, int32_t cached = 12, int32_t completion = 5) {
  ApiEvent e;
  e.kind = ApiEvent::Kind::Done;
  e.finish_reason = reason;
  e.usage.prompt_tokens = prompt;
  e.usage.cached_tokens = cached;
  e.usage.completion_tokens = completion;
  return e;
}

AnthropicMeta meta() {
  AnthropicMeta m = new_anthropic_meta("qwen2.5-coder:0.5b", 64);
  m.prompt_tokens = 20;
  return m;
}

// The whole answer's JSON for these events.
json whole(const std::vector<ApiEvent>& events) {
  std::unique_ptr<ResponseWriter> w = anthropic_writer(meta(), false);
  REQUIRE_FALSE(w->streamed());
  for (const ApiEvent& e : events) REQUIRE(w->write(e).empty());
  const HttpResponse r = w->response();
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "application/json");
  return json::parse(r.body);
}

// The streamed answer as (event name, data) pairs; each data's "type" is its event name.
std::vector<std::pair<std::string, json>> streamed(const std::vector<ApiEvent>& events) {
  std::unique_ptr<ResponseWriter> w = anthropic_writer(meta(), true);
  REQUIRE(w->streamed());
  REQUIRE(w->content_type() == "text/event-stream");
  std::string wire = w->open();
  for (const ApiEvent& e : events) wire += w->write(e);
  std::vector<std::pair<std::string, json>> out;
  for (size_t at = 0; at < wire.size();) {
    const size_t end = wire.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string frame = wire.substr(at, end - at);
    at = end + 2;
    REQUIRE(frame.rfind("event: ", 0) == 0);
    const size_t nl = frame.find('\n');
    REQUIRE(frame.compare(nl + 1, 6, "data: ") == 0);
    out.emplace_back(frame.substr(7, nl - 7), json::parse(frame.substr(nl + 7)));
    REQUIRE(out.back().second.at("type") == out.back().first);
  }
  return out;
}

std::vector<std::string> names(const std::vector<std::pair<std::string, json>>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.first);
  return out;
}

}  // namespace

TEST_CASE("A plain conversation maps to chat messages, with Anthropic's sampling defaults") {
  const ApiRequest r = parsed(body_with(R"([{"role":"user","content":"Hi"},
      {"role":"assistant","content":[{"type":"text","text":"Hello."}]},{"role":"user","content":"How are you?"}])",
                                        R"({"system":"Be brief.","model":"qwen2.5-coder:0.5b","stream":true})"));
  REQUIRE(r.chat);
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "Be brief.");
  CHECK(r.messages[1].role == "user");
  CHECK(r.messages[1].content == "Hi");
  CHECK(r.messages[1].parts.empty());  // one text block reads as a string does
  CHECK(r.messages[2].role == "assistant");
  CHECK(r.messages[2].content == "Hello.");
  CHECK(r.messages[3].content == "How are you?");
  CHECK(r.max_tokens == 16);
  CHECK(r.stream);
  CHECK(r.sampling.temperature == 1.0f);
  CHECK(r.sampling.top_p == 1.0f);
  CHECK(r.sampling.top_k == 0);
  CHECK(r.sampling.min_p == 0.0f);
  CHECK(r.stop.empty());
  CHECK(r.tools.empty());
}

TEST_CASE("System text blocks become one system message, and cache_control is ignored") {
  const ApiRequest r = parsed(body_with(R"([{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}])",
                                        R"({"system":[{"type":"text","text":"You are terse."},
      {"type":"text","text":"Answer in English.","cache_control":{"type":"ephemeral"}}]})"));
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "You are terse.\nAnswer in English.");
  CHECK(r.messages[0].parts == std::vector<std::string>{"You are terse.", "Answer in English."});
  CHECK(r.messages[1].parts == std::vector<std::string>{"a", "b"});
  // An empty system prompt is no system prompt (the template's default applies).
  CHECK(parsed(body_with(R"([{"role":"user","content":"x"}])", R"({"system":""})")).messages.size() == 1);
}

TEST_CASE("Consecutive turns of one role are combined into one turn, as Anthropic does") {
  const ApiRequest r = parsed(body_with(
      R"([{"role":"user","content":"one"},{"role":"user","content":[{"type":"text","text":"two"}]},
          {"role":"assistant","content":"ok"},{"role":"user","content":"three"}])"));
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == "user");
  CHECK(r.messages[0].content == "one\ntwo");
  CHECK(r.messages[0].parts == std::vector<std::string>{"one", "two"});

  // A turn of calls alone, then one of text: one assistant turn with both.
  const ApiRequest calls = parsed(body_with(R"([{"role":"user","content":"x"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
      {"role":"assistant","content":"done"},{"role":"user","content":"y"}])"));
  REQUIRE(calls.messages.size() == 3);
  CHECK(calls.messages[1].content == "done");
  CHECK(calls.messages[1].parts == std::vector<std::string>{"done"});
  CHECK(calls.messages[1].tool_calls.size() == 1);
}

TEST_CASE("tool_use blocks become the assistant's calls and tool_result blocks tool messages, in order") {
  const ApiRequest r = parsed(body_with(R"([
      {"role":"user","content":"Weather in Paris and Oslo?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"...","signature":"s"},
        {"type":"text","text":"Checking."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
        {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Oslo","unit":"c"}}]},
      {"role":"user","content":[{"type":"text","text":"Here:"},
        {"type":"tool_result","tool_use_id":"toolu_1","content":"18 C"},
        {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no"},{"type":"text","text":"data"}],
         "is_error":true},
        {"type":"text","text":"Summarize."}]}])"));
  REQUIRE(r.messages.size() == 6);
  const ChatMessage& a = r.messages[1];
  CHECK(a.role == "assistant");
  CHECK(a.content == "Checking.");  // the thinking block is dropped
  REQUIRE(a.tool_calls.size() == 2);
  CHECK(a.tool_calls[0].id == "toolu_1");
  CHECK(a.tool_calls[0].name == "get_weather");
  CHECK(json::parse(a.tool_calls[0].arguments) == json{{"city", "Paris"}});
  CHECK(json::parse(a.tool_calls[1].arguments) == json{{"city", "Oslo"}, {"unit", "c"}});
  CHECK(r.messages[2].role == "user");
  CHECK(r.messages[2].content == "Here:");
  CHECK(r.messages[3].role == "tool");
  CHECK(r.messages[3].tool_call_id == "toolu_1");
  CHECK(r.messages[3].name == "get_weather");
  CHECK(r.messages[3].content == "18 C");
  CHECK(r.messages[4].role == "tool");
  CHECK(r.messages[4].tool_call_id == "toolu_2");
  CHECK(r.messages[4].content == "Error: no\ndata");  // is_error said in the text
  CHECK(r.messages[5].role == "user");
  CHECK(r.messages[5].content == "Summarize.");
}

TEST_CASE("Tools keep their input_schema as parameters and render as OpenAI's function objects") {
  const ApiRequest r = parsed(body_with(R"([{"role":"user","content":"x"}])", R"({"tools":[
      {"name":"get_weather","description":"Current weather","input_schema":{"type":"object",
        "properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}},
      {"type":"custom","name":"now","input_schema":{"type":"object"},"strict":true}],
      "tool_choice":{"type":"any","disable_parallel_tool_use":true}})"));
  REQUIRE(r.tools.size() == 2);
  CHECK(r.tools[0].name == "get_weather");
  CHECK(r.tools[0].description == "Current weather");
  CHECK(json::parse(r.tools[0].parameters) ==
        json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"));
  CHECK_FALSE(r.tools[0].strict);
  CHECK(r.tools[1].strict);
  // The same object an OpenAI client sends for the tool, so templates render the same text.
  CHECK(r.tools[0].json.rfind(R"({"type":"function","function":{"name":"get_weather","description":)", 0) == 0);
  CHECK(json::parse(r.tools[0].json) == json{{"type", "function"},
                                             {"function",
                                              {{"name", "get_weather"},
                                               {"description", "Current weather"},
                                               {"parameters", json::parse(r.tools[0].parameters)}}}});
  CHECK(json::parse(r.tools[1].json)["function"].count("description") == 0);
  CHECK(r.tool_choice == ToolChoice::Required);
  CHECK_FALSE(r.parallel_tool_calls);
}

TEST_CASE("tool_choice maps auto, any, tool and none") {
  const std::string tools = R"("tools":[{"name":"f","input_schema":{"type":"object"}}])";
  auto choice = [&](const std::string& c) {
    return parsed(body_with(R"([{"role":"user","content":"x"}])", "{" + tools + ",\"tool_choice\":" + c + "}"));
  };
  CHECK(parsed(body_with(R"([{"role":"user","content":"x"}])", "{" + tools + "}")).tool_choice == ToolChoice::Auto);
  CHECK(choice(R"({"type":"auto"})").tool_choice == ToolChoice::Auto);
  CHECK(choice(R"({"type":"auto"})").parallel_tool_calls);
  CHECK(choice(R"({"type":"any"})").tool_choice == ToolChoice::Required);
  CHECK(choice(R"({"type":"none"})").tool_choice == ToolChoice::None);
  const ApiRequest named = choice(R"({"type":"tool","name":"f","disable_parallel_tool_use":false})");
  CHECK(named.tool_choice == ToolChoice::Named);
  CHECK(named.tool_choice_name == "f");
  CHECK(named.parallel_tool_calls);
}

TEST_CASE("Sampling fields take Anthropic's ranges, and stop_sequences become stop strings") {
  const ApiRequest r = parsed(body_with(R"([{"role":"user","content":"x"}])",
                                        R"({"temperature":0.2,"top_p":0.9,"top_k":40,"stop_sequences":["END","","\n\n"],
                                           "metadata":{"user_id":"u-1"},"thinking":{"type":"disabled"}})"));
  CHECK(r.sampling.temperature == Approx(0.2f));
  CHECK(r.sampling.top_p == Approx(0.9f));
  CHECK(r.sampling.top_k == 40);
  CHECK(r.stop == std::vector<std::string>{"END", "\n\n"});
  CHECK(r.max_tokens == 16);
  // top_p 0 keeps only the most likely token: greedy.
  CHECK(parsed(body_with(R"([{"role":"user","content":"x"}])", R"({"top_p":0})")).sampling.temperature == 0.0f);
}

TEST_CASE("count_tokens needs no max_tokens and reads the same conversation") {
  json b = body_with(R"([{"role":"user","content":"x"}])", R"({"system":"s"})");
  b.erase("max_tokens");
  const ApiRequest r = parsed(b, AnthropicPurpose::CountTokens);
  CHECK(r.messages.size() == 2);
  const ApiError e = refused(b);
  CHECK(e.status == 400);
  CHECK(e.message == "'max_tokens' is required");
}

TEST_CASE("Requests hearth cannot serve are refused with 400 naming what") {
  const json ok = body_with(R"([{"role":"user","content":"x"}])");
  auto with = [&](const char* key, const char* value) {
    json b = ok;
    b[key] = json::parse(value);
    return b;
  };
  struct Case {
    json body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {with("max_tokens", "0"), "max_tokens"},
      {with("max_tokens", "\"16\""), "max_tokens"},
      {with("temperature", "1.5"), "temperature"},
      {with("top_k", "-1"), "top_k"},
      {with("stop_sequences", "\"END\""), "stop_sequences"},
      {with("stop_sequences", R"(["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"),
       "at most 16"},
      {with("thinking", R"({"type":"sometimes"})"), "must be enabled, adaptive or disabled"},
      {with("metadata", R"({"user_id":5})"), "metadata.user_id"},
      {with("system", R"([{"type":"image","source":{}}])"), "'system[0]' is an image block: not supported yet"},
      {with("messages", R"([{"role":"user","content":[{"type":"image","source":{"type":"base64"}}]}])"),
       "'messages[0].content[0]' is an image block: not supported yet"},
      {with("messages", R"([{"role":"user","content":[{"type":"document","source":{}}]}])"),
       "is a document block: not supported yet"},
      {with("messages", R"([{"role":"user","content":[{"type":"search_result"}]}])"), "'search_result' block"},
      {with("messages", R"([{"role":"system","content":"x"}])"), "top-level 'system'"},
      {with("messages", R"([{"role":"user","content":"x"},{"role":"assistant","content":"The answer is"}])"),
       "prefill"},
      {with("messages",
            R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}])"),
       "toolu_9"},
      {with(
           "messages",
           R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]},{"role":"user","content":"y"}])"),
       "input' must be an object"},
      {with("tools", R"([{"type":"bash_20250124","name":"bash"}])"), "server tool"},
      {with("tools", R"([{"name":"has space","input_schema":{"type":"object"}}])"), "letters, digits"},
      {with("tools", R"([{"name":"f"}])"), "input_schema"},
      {with("tools", R"([{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}])"), "two tools are named 'f'"},
      {with("tool_choice", R"({"type":"any"})"), "needs 'tools'"},
      {with("tool_choice", R"({"type":"sometimes"})"), "auto, any, tool or none"},
      {with("model", "5"), "model"},
  };
  for (const Case& c : cases) {
    INFO(c.body.dump());
    const ApiError e = refused(c.body);
    CHECK(e.status == 400);
    INFO(e.message);
    CHECK(e.message.find(c.says) != std::string::npos);
  }
  json named = with("tools", R"([{"name":"f","input_schema":{}}])");
  named["tool_choice"] = json::parse(R"({"type":"tool","name":"g"})");
  CHECK(refused(named).message.find("'g'") != std::string::npos);
}

TEST_CASE("The whole answer is a message with text and tool_use blocks, stop_reason and usage") {
  const json m =
      whole({text("Let me "), text("check."), call_begin(0, "call_1", "get_weather"), call_arguments(0, "{\"city\":"),
             call_arguments(0, " \"Paris\"}"), call_end(0), call_begin(1, "call_2", "now"), call_end(1), done("stop")});
  CHECK(m.at("id").get<std::string>().rfind("msg_", 0) == 0);
  CHECK(m.at("type") == "message");
  CHECK(m.at("role") == "assistant");
  CHECK(m.at("model") == "qwen2.5-coder:0.5b");
  const json& content = m.at("content");
  REQUIRE(content.size() == 3);
  CHECK(content[0] == json{{"type", "text"}, {"text", "Let me check."}});
  CHECK(content[1] ==
        json{{"type", "tool_use"}, {"id", "call_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}});
  CHECK(content[2].at("input") == json::object());  // a call with no arguments
  CHECK(m.at("stop_reason") == "tool_use");
  CHECK(m.at("stop_sequence").is_null());
  // The prompt's 20 tokens: 12 from the cache, 8 computed; nothing written at a client's request.
  CHECK(m.at("usage") == json{{"input_tokens", 8},
                              {"cache_creation_input_tokens", 0},
                              {"cache_read_input_tokens", 12},
                              {"output_tokens", 5}});
  CHECK(m.at("timings").at("ttft_ms").is_number());
}

TEST_CASE("stop_reason tells a stop string, the end of the turn, max_tokens and a full context apart") {
  ApiEvent by_string = done("stop");
  by_string.stop_sequence = "END";
  const json m = whole({text("a"), by_string});
  CHECK(m.at("stop_reason") == "stop_sequence");
  CHECK(m.at("stop_sequence") == "END");
  CHECK(whole({text("a"), done("stop")}).at("stop_reason") == "end_turn");
  CHECK(whole({done("stop")}).at("content") == json::array());  // nothing said at all
  CHECK(anthropic_stop_reason(done("length", 20, 0, 64), false, 64) == "max_tokens");
  CHECK(anthropic_stop_reason(done("length", 20, 0, 30), false, 64) == "model_context_window_exceeded");
  CHECK(anthropic_stop_reason(done("cancelled", 20, 0, 3), false, 64) == "max_tokens");
  CHECK(anthropic_stop_reason(by_string, true, 64) == "stop_sequence");
}

TEST_CASE("An engine failure is Anthropic's error object, whole and streamed") {
  ApiEvent failed;
  failed.kind = ApiEvent::Kind::Error;
  failed.error = internal_error("the backend failed");
  std::unique_ptr<ResponseWriter> w = anthropic_writer(meta(), false);
  CHECK(w->error_shape() == ErrorShape::Anthropic);
  w->write(text("partial"));
  w->write(failed);
  const HttpResponse r = w->response();
  CHECK(r.status == 500);
  CHECK(json::parse(r.body) ==
        json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", "the backend failed"}}}});

  const auto events = streamed({text("partial"), failed});
  CHECK(names(events) ==
        std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta", "error"});
  CHECK(events.back().second.at("error").at("type") == "api_error");
}

TEST_CASE("A streamed text answer is Anthropic's event sequence") {
  ApiEvent end = done("stop");
  const auto events = streamed({text("Hel"), text(""), text("lo"), end});
  CHECK(names(events) == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                                  "content_block_delta", "content_block_stop", "message_delta",
                                                  "message_stop"});
  const json& start = events[0].second.at("message");
  CHECK(start.at("role") == "assistant");
  CHECK(start.at("content") == json::array());
  CHECK(start.at("stop_reason").is_null());
  CHECK(start.at("usage").at("input_tokens") == 20);  // the prompt, before the cache split is known
  CHECK(start.at("usage").at("output_tokens") == 0);
  CHECK(events[2].second ==
        json{{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  CHECK(events[3].second.at("delta") == json{{"type", "text_delta"}, {"text", "Hel"}});
  CHECK(events[4].second.at("delta").at("text") == "lo");
  CHECK(events[5].second.at("index") == 0);
  const json& delta = events[6].second;
  CHECK(delta.at("delta") == json{{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}});
  CHECK(delta.at("usage") == json{{"input_tokens", 8},
                                  {"cache_creation_input_tokens", 0},
                                  {"cache_read_input_tokens", 12},
                                  {"output_tokens", 5}});
}

TEST_CASE("A streamed tool call is a tool_use block whose input comes in input_json_delta pieces") {
  const auto events = streamed({text("Checking."), call_begin(0, "call_1", "get_weather"), call_arguments(0, "{\"ci"),
                                call_arguments(0, "ty\": \"Paris\"}"), call_end(0), call_begin(1, "call_2", "now"),
                                call_end(1), done("stop")});
  CHECK(names(events) == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                                  "content_block_stop",  // text, 0
                                                  "content_block_start", "content_block_delta", "content_block_delta",
                                                  "content_block_stop",                         // get_weather, 1
                                                  "content_block_start", "content_block_stop",  // now, 2
                                                  "message_delta", "message_stop"});
  CHECK(events[4].second.at("index") == 0);
  CHECK(events[5].second ==
        json{{"type", "content_block_start"},
             {"index", 1},
             {"content_block",
              {{"type", "tool_use"}, {"id", "call_1"}, {"name", "get_weather"}, {"input", json::object()}}}});
  CHECK(events[6].second.at("delta") == json{{"type", "input_json_delta"}, {"partial_json", "{\"ci"}});
  CHECK(events[7].second.at("index") == 1);
  std::string input;
  for (const auto& e : events)
    if (e.first == "content_block_delta" && e.second["index"] == 1) input += e.second["delta"]["partial_json"];
  CHECK(json::parse(input) == json{{"city", "Paris"}});
  CHECK(events[9].second.at("content_block").at("name") == "now");
  CHECK(events[10].second.at("index") == 2);
  CHECK(events[11].second.at("delta").at("stop_reason") == "tool_use");
}

TEST_CASE("thinking enabled or adaptive asks the template to think, absent or disabled does not") {
  const std::string m = R"([{"role":"user","content":"x"}])";
  CHECK_FALSE(parsed(body_with(m)).chat_options.enable_thinking);
  CHECK_FALSE(parsed(body_with(m, R"({"thinking":{"type":"disabled"}})")).chat_options.enable_thinking);
  CHECK(parsed(body_with(m, R"({"thinking":{"type":"enabled","budget_tokens":1024}})")).chat_options.enable_thinking);
  CHECK(parsed(body_with(m, R"({"thinking":{"type":"adaptive"}})")).chat_options.enable_thinking);
}

TEST_CASE("A thinking model's reasoning is a thinking block before the text, whole and streamed") {
  ApiEvent r1, r2;
  r1.kind = r2.kind = ApiEvent::Kind::Reasoning;
  r1.text = "The user wants ";
  r2.text = "a greeting.";
  const json m = whole({r1, r2, text("Hello!"), done("stop")});
  REQUIRE(m.at("content").size() == 2);
  CHECK(m.at("content")[0] ==
        json{{"type", "thinking"}, {"thinking", "The user wants a greeting."}, {"signature", ""}});
  CHECK(m.at("content")[1] == json{{"type", "text"}, {"text", "Hello!"}});

  const auto events = streamed({r1, r2, text("Hello!"), done("stop")});
  CHECK(names(events) == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                                  "content_block_delta", "content_block_stop", "content_block_start",
                                                  "content_block_delta", "content_block_stop", "message_delta",
                                                  "message_stop"});
  CHECK(events[2].second.at("content_block") == json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
  CHECK(events[3].second.at("delta") == json{{"type", "thinking_delta"}, {"thinking", "The user wants "}});
  CHECK(events[4].second.at("delta").at("thinking") == "a greeting.");
  CHECK(events[6].second.at("index") == 1);
  CHECK(events[7].second.at("delta") == json{{"type", "text_delta"}, {"text", "Hello!"}});
}
