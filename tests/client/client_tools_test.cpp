// Tools and response formats in libhearth-client, against a scripted fake daemon
// (fake_daemon.h): what the request says (tools, tool_choice, parallel_tool_calls,
// response_format, assistant tool calls, tool results) and the tool calls read back from
// whole and streamed answers.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_daemon.h"
#include "hearth/client.h"

namespace {

using hearth::test::FakeDaemon;
using hearth::test::http_chunk;
using hearth::test::http_response;
using hearth::test::last_chunk;
using hearth::test::sse_event;
using hearth::test::sse_head;
using hearth::test::write_all;
using Json = nlohmann::json;

struct Handle {
  explicit Handle(const FakeDaemon& daemon) {
    REQUIRE(hearth_client_open(daemon.path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

int append(const char* piece, size_t len, void* user_data) {
  static_cast<std::string*>(user_data)->append(piece, len);
  return 0;
}

const char* kWeatherTool =
    R"([{"type":"function","function":{"name":"get_weather","description":"The weather in a city",)"
    R"("parameters":{"type":"object","properties":{"unit":{"type":"string"},"city":{"type":"string"}},)"
    R"("required":["city"]}}}])";

// A whole answer: no content, two calls.
const char* kWholeCalls =
    R"({"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,)"
    R"("message":{"role":"assistant","content":null,"tool_calls":[)"
    R"({"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
    R"({"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},)"
    R"("finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}})";

void answer_whole_calls(const FakeDaemon::Request&, int fd) {
  write_all(fd, http_response(200, "application/json", kWholeCalls));
}

std::string chunk(const std::string& delta_json, const std::string& finish = "null") {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
         delta_json + R"(,"finish_reason":)" + finish + "}]}";
}

// A streamed answer as hearthd writes one: a little text, then call 0 opened with its id and
// name and its arguments in pieces (split inside a key and inside a string), then call 1.
void stream_calls(const FakeDaemon::Request&, int fd) {
  std::string s = sse_head() + sse_event(chunk(R"({"role":"assistant","content":""})")) +
                  sse_event(chunk(R"({"content":"Checking."})")) +
                  sse_event(chunk(R"({"tool_calls":[{"index":0,"id":"call_a","type":"function",)"
                                  R"("function":{"name":"get_weather","arguments":""}}]})"));
  for (const char* piece : {"{\\n  \\\"ci", "ty\\\": \\\"Pa", "ris\\\"\\n}"}) {
    s += sse_event(chunk(std::string(R"({"tool_calls":[{"index":0,"function":{"arguments":")") + piece + "\"}}]}"));
  }
  s += sse_event(chunk(R"({"tool_calls":[{"index":1,"id":"call_b","type":"function",)"
                       R"("function":{"name":"get_time","arguments":""}}]})"));
  s += sse_event(chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]})"));
  s += sse_event(chunk("{}", R"("tool_calls")"));
  write_all(fd, s + http_chunk("data: [DONE]\n\n") + last_chunk());
}

hearth_chat_message message(const char* role, const char* content) {
  hearth_chat_message m;
  hearth_chat_message_init(&m);
  m.role = role;
  m.content = content;
  return m;
}

}  // namespace

TEST_CASE("tools, tool_choice and parallel_tool_calls go out as the caller wrote them", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "Weather in Paris?");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.tools = kWeatherTool;
  o.tool_choice = "required";
  o.parallel_tool_calls = 0;
  REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          HEARTH_OK);
  const std::string sent = daemon.requests().at(0).body;
  const Json body = Json::parse(sent);
  CHECK(body["tools"] == Json::parse(kWeatherTool));
  // Property order is the caller's (the model writes the arguments in that order).
  CHECK(sent.find(R"("properties":{"unit":{"type":"string"},"city")") != std::string::npos);
  CHECK(body["tool_choice"] == "required");
  CHECK(body["parallel_tool_calls"] == false);
  CHECK_FALSE(body.contains("response_format"));
}

TEST_CASE("tool_choice takes auto, none, required, a tool's name or OpenAI's object", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "hi");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.tools = kWeatherTool;
  const std::vector<std::pair<const char*, Json>> cases = {
      {"auto", "auto"},
      {"none", "none"},
      {"get_weather", Json::parse(R"({"type":"function","function":{"name":"get_weather"}})")},
      {R"({"type":"function","function":{"name":"auto"}})",
       Json::parse(R"({"type":"function","function":{"name":"auto"}})")},
  };
  for (const auto& [choice, expected] : cases) {
    o.tool_choice = choice;
    REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
            HEARTH_OK);
    CHECK(Json::parse(daemon.requests().back().body)["tool_choice"] == expected);
  }
  // Defaults: nothing about tools is sent.
  hearth_request_options_init(&o);
  REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          HEARTH_OK);
  const Json body = Json::parse(daemon.requests().back().body);
  for (const char* key : {"tools", "tool_choice", "parallel_tool_calls", "response_format"}) {
    INFO(key);
    CHECK_FALSE(body.contains(key));
  }
}

TEST_CASE("response_format asks for a JSON object or for JSON that fits a schema", "[client][tools]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    write_all(fd, http_response(200, "application/json",
                                R"({"choices":[{"index":0,"text":"{\"a\": 1}","finish_reason":"stop"}]})"));
  });
  Handle h(daemon);
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.response_format = HEARTH_FORMAT_JSON_OBJECT;
  REQUIRE(hearth_client_complete(h.client, "x", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  CHECK(Json::parse(daemon.requests().back().body)["response_format"] == Json::parse(R"({"type":"json_object"})"));

  o.response_format = HEARTH_FORMAT_JSON_SCHEMA;
  o.json_schema = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})";
  o.json_schema_strict = 1;
  REQUIRE(hearth_client_complete(h.client, "x", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  const std::string sent = daemon.requests().back().body;
  CHECK(Json::parse(sent)["response_format"] == Json::parse(R"({"type":"json_schema","json_schema":{"schema":)" +
                                                            std::string(o.json_schema) + R"(,"strict":true}})"));
  CHECK(sent.find(R"({"b":{"type":"integer"},"a")") != std::string::npos);
}

TEST_CASE("options that cannot make a request are refused before anything is sent", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "hi");
  hearth_message plain{"user", "hi"};
  hearth_request_options o;
  auto refused = [&](int rc, const char* detail) {
    CHECK(rc == HEARTH_ERR_INVALID_ARGUMENT);
    CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains(detail));
  };
  auto chat_v2 = [&] {
    return hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  };

  hearth_request_options_init(&o);
  o.tools = "[{\"type\": \"function\",";
  refused(chat_v2(), "options.tools is not JSON");
  o.tools = R"({"type":"function"})";
  refused(chat_v2(), "options.tools must be a JSON array");
  o.tools = kWeatherTool;
  refused(hearth_client_chat(h.client, &plain, 1, &o, nullptr, nullptr, nullptr, nullptr), "hearth_client_chat_v2");
  refused(hearth_client_complete(h.client, "x", &o, nullptr, nullptr, nullptr, nullptr), "for chats");

  hearth_request_options_init(&o);
  o.response_format = HEARTH_FORMAT_JSON_SCHEMA;
  refused(chat_v2(), "needs options.json_schema");
  o.json_schema = "{not json";
  refused(chat_v2(), "options.json_schema is not JSON");
  o.response_format = HEARTH_FORMAT_TEXT;
  o.json_schema = "{}";
  refused(chat_v2(), "response_format is not HEARTH_FORMAT_JSON_SCHEMA");
  o.json_schema = nullptr;
  o.response_format = 7;
  refused(chat_v2(), "enum hearth_response_format");

  CHECK(daemon.requests().empty());
}

TEST_CASE("assistant tool calls and tool results go out in OpenAI's message form", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  const hearth_tool_call calls[] = {{"call_a", "get_weather", R"({"city": "Paris"})"}};
  hearth_chat_message messages[4] = {message("user", "Weather in Paris?"), message("assistant", nullptr),
                                     message("tool", R"({"celsius": 18})"), message("user", "And so?")};
  messages[1].tool_calls = calls;
  messages[1].n_tool_calls = 1;
  messages[2].tool_call_id = "call_a";
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.tools = kWeatherTool;
  char* text = nullptr;
  REQUIRE(hearth_client_chat_v2(h.client, messages, 4, &o, nullptr, nullptr, &text, nullptr, nullptr, nullptr) ==
          HEARTH_OK);
  hearth_free(text);
  CHECK(Json::parse(daemon.requests().at(0).body)["messages"] == Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "{\"celsius\": 18}", "tool_call_id": "call_a"},
    {"role": "user", "content": "And so?"}])"));
}

TEST_CASE("messages that cannot be sent are refused with what is wrong", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  auto send = [&](const hearth_chat_message* messages, size_t n) {
    return hearth_client_chat_v2(h.client, messages, n, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  };
  hearth_chat_message m[2] = {message("user", "hi"), message("tool", "18 C")};
  CHECK(send(m, 2) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("message 1 (a tool result) has no tool_call_id"));

  m[1] = message("assistant", nullptr);
  CHECK(send(m, 2) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("message 1 has a NULL content"));

  m[1].n_tool_calls = 1;
  CHECK(send(m, 2) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("tool_calls is NULL"));

  const hearth_tool_call bad = {"call_a", nullptr, "{}"};
  m[1].tool_calls = &bad;
  CHECK(send(m, 2) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("tool call 0 has a NULL id, name or arguments"));

  hearth_chat_message uninitialised[1] = {};
  uninitialised[0].role = "user";
  uninitialised[0].content = "hi";
  CHECK(send(uninitialised, 1) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("hearth_chat_message_init"));

  m[1] = message("user", "again");
  m[1].struct_size = sizeof(hearth_chat_message) - sizeof(void*);
  CHECK(send(m, 2) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("differs from message 0's"));
  CHECK(daemon.requests().empty());
}

TEST_CASE("an array of messages from an older, smaller struct is read with its own stride", "[client][tools]") {
  // What a program built against a header whose hearth_chat_message ended at content sends.
  struct OldMessage {
    size_t struct_size;
    const char* role;
    const char* content;
  };
  const OldMessage old[2] = {{sizeof(OldMessage), "system", "Be brief."}, {sizeof(OldMessage), "user", "hi"}};
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  REQUIRE(hearth_client_chat_v2(h.client, reinterpret_cast<const hearth_chat_message*>(old), 2, nullptr, nullptr,
                                nullptr, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  CHECK(Json::parse(daemon.requests().at(0).body)["messages"] ==
        Json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}])"));
}

TEST_CASE("the tool calls of a whole answer come back in one block, with finish reason tool_calls", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "Weather in Paris and Oslo?");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.tools = kWeatherTool;
  char* text = nullptr;
  hearth_tool_call* calls = nullptr;
  size_t n_calls = 99;
  hearth_stats stats;
  hearth_stats_init(&stats);
  REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, &text, &calls, &n_calls, &stats) == HEARTH_OK);
  REQUIRE(text != nullptr);
  CHECK(std::string(text).empty());  // content null: a call alone
  hearth_free(text);
  REQUIRE(n_calls == 2);
  CHECK(std::string(calls[0].id) == "call_a");
  CHECK(std::string(calls[0].name) == "get_weather");
  CHECK(std::string(calls[0].arguments) == R"({"city": "Paris"})");
  CHECK(std::string(calls[1].id) == "call_b");
  CHECK(std::string(calls[1].arguments) == R"({"city": "Oslo"})");
  hearth_free(calls);
  CHECK(stats.finish_reason == HEARTH_FINISH_TOOL_CALLS);
  CHECK(std::string(stats.finish_reason_text) == "tool_calls");
  CHECK(stats.completion_tokens == 9);
}

TEST_CASE("a stream's tool calls are put together from their pieces, and the text callback sees text only",
          "[client][tools]") {
  FakeDaemon daemon(stream_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "Weather in Paris, and the time?");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.tools = kWeatherTool;
  std::string streamed;
  char* text = nullptr;
  hearth_tool_call* calls = nullptr;
  size_t n_calls = 0;
  hearth_stats stats;
  hearth_stats_init(&stats);
  REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, append, &streamed, &text, &calls, &n_calls, &stats) == HEARTH_OK);
  CHECK(streamed == "Checking.");
  CHECK(std::string(text) == "Checking.");
  hearth_free(text);
  REQUIRE(n_calls == 2);
  CHECK(std::string(calls[0].id) == "call_a");
  CHECK(std::string(calls[0].name) == "get_weather");
  CHECK(std::string(calls[0].arguments) == "{\n  \"city\": \"Paris\"\n}");
  CHECK(std::string(calls[1].id) == "call_b");
  CHECK(std::string(calls[1].name) == "get_time");
  CHECK(std::string(calls[1].arguments) == "{}");
  hearth_free(calls);
  CHECK(stats.finish_reason == HEARTH_FINISH_TOOL_CALLS);
  const Json body = Json::parse(daemon.requests().at(0).body);
  CHECK(body["stream"] == true);
  CHECK(body["tools"] == Json::parse(kWeatherTool));
}

TEST_CASE("an answer without calls gives none, the calls may be left behind, and a bad piece is a protocol error",
          "[client][tools]") {
  SECTION("no calls: NULL and 0") {
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
      write_all(fd, http_response(200, "application/json",
                                  R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},)"
                                  R"("finish_reason":"stop"}]})"));
    });
    Handle h(daemon);
    hearth_chat_message m = message("user", "hi");
    hearth_tool_call* calls = reinterpret_cast<hearth_tool_call*>(&m);  // overwritten
    size_t n_calls = 5;
    REQUIRE(hearth_client_chat_v2(h.client, &m, 1, nullptr, nullptr, nullptr, nullptr, &calls, &n_calls, nullptr) ==
            HEARTH_OK);
    CHECK(calls == nullptr);
    CHECK(n_calls == 0);
  }
  SECTION("out_calls NULL: the calls are dropped, the text still comes") {
    FakeDaemon daemon(stream_calls);
    Handle h(daemon);
    hearth_chat_message m = message("user", "hi");
    std::string streamed;
    REQUIRE(hearth_client_chat_v2(h.client, &m, 1, nullptr, append, &streamed, nullptr, nullptr, nullptr, nullptr) ==
            HEARTH_OK);
    CHECK(streamed == "Checking.");
  }
  SECTION("out_calls without out_n_calls is an invalid argument") {
    FakeDaemon daemon(stream_calls);
    Handle h(daemon);
    hearth_chat_message m = message("user", "hi");
    hearth_tool_call* calls = nullptr;
    CHECK(hearth_client_chat_v2(h.client, &m, 1, nullptr, nullptr, nullptr, nullptr, &calls, nullptr, nullptr) ==
          HEARTH_ERR_INVALID_ARGUMENT);
  }
  SECTION("a piece for a call that was never opened") {
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
      write_all(fd, sse_head() + sse_event(chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":"{"}}]})")) +
                        http_chunk("data: [DONE]\n\n") + last_chunk());
    });
    Handle h(daemon);
    hearth_chat_message m = message("user", "hi");
    std::string streamed;
    hearth_tool_call* calls = nullptr;
    size_t n_calls = 0;
    CHECK(hearth_client_chat_v2(h.client, &m, 1, nullptr, append, &streamed, nullptr, &calls, &n_calls, nullptr) ==
          HEARTH_ERR_PROTOCOL);
    CHECK(calls == nullptr);
    CHECK(n_calls == 0);
    CHECK_THAT(hearth_client_last_error(h.client), Catch::Contains("index"));
  }
}

TEST_CASE("options from an older, smaller struct send nothing of tools or formats", "[client][tools]") {
  FakeDaemon daemon(answer_whole_calls);
  Handle h(daemon);
  hearth_chat_message m = message("user", "hi");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.struct_size = offsetof(hearth_request_options, tools);  // what a 0.3 program passes
  o.tools = "not read";                                     // beyond its struct: never read
  o.response_format = 7;
  REQUIRE(hearth_client_chat_v2(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          HEARTH_OK);
  const Json body = Json::parse(daemon.requests().at(0).body);
  CHECK_FALSE(body.contains("tools"));
  CHECK_FALSE(body.contains("response_format"));
  CHECK_FALSE(body.contains("parallel_tool_calls"));
}

TEST_CASE("options init never writes past the caller's struct, whichever header it was built with", "[client][tools]") {
  // A program built against 0.3 calls the exported hearth_request_options_init (the
  // parentheses get past the macro) on its 80-byte struct: the bytes after it stay.
  alignas(hearth_request_options) unsigned char old[sizeof(hearth_request_options) + 16];
  std::memset(old, 0xAB, sizeof(old));
  (hearth_request_options_init)(reinterpret_cast<hearth_request_options*>(old));
  const size_t old_size = offsetof(hearth_request_options, tools);
  const auto* o = reinterpret_cast<const hearth_request_options*>(old);
  CHECK(o->struct_size == old_size);
  CHECK(o->temperature == -1.0f);
  CHECK(o->repetition_penalty == 1.0f);
  for (size_t i = old_size; i < sizeof(old); ++i) CHECK(old[i] == 0xAB);

  // The macro passes sizeof: every member of this header set, nothing beyond.
  alignas(hearth_request_options) unsigned char now[sizeof(hearth_request_options) + 16];
  std::memset(now, 0xAB, sizeof(now));
  hearth_request_options_init(reinterpret_cast<hearth_request_options*>(now));
  const auto* n = reinterpret_cast<const hearth_request_options*>(now);
  CHECK(n->struct_size == sizeof(hearth_request_options));
  CHECK(n->tools == nullptr);
  CHECK(n->parallel_tool_calls == -1);
  CHECK(n->response_format == HEARTH_FORMAT_TEXT);
  for (size_t i = sizeof(hearth_request_options); i < sizeof(now); ++i) CHECK(now[i] == 0xAB);

  // A later header's larger struct: its extra bytes zeroed, its struct_size kept.
  hearth_request_options_init_sized(reinterpret_cast<hearth_request_options*>(now), sizeof(now));
  CHECK(n->struct_size == sizeof(now));
  CHECK(n->top_k == -1);
  for (size_t i = sizeof(hearth_request_options); i < sizeof(now); ++i) CHECK(now[i] == 0);
}

TEST_CASE("stats init never writes past the caller's struct, whichever header it was built with", "[client]") {
  // A program built against 0.5 calls the exported hearth_stats_init on its 216-byte struct.
  alignas(hearth_stats) unsigned char old[sizeof(hearth_stats) + 16];
  std::memset(old, 0xAB, sizeof(old));
  (hearth_stats_init)(reinterpret_cast<hearth_stats*>(old));
  const size_t old_size = offsetof(hearth_stats, draft_tokens);
  CHECK(reinterpret_cast<const hearth_stats*>(old)->struct_size == old_size);
  CHECK(reinterpret_cast<const hearth_stats*>(old)->cache_restore_bytes == 0);
  for (size_t i = old_size; i < sizeof(old); ++i) CHECK(old[i] == 0xAB);
  // The macro passes sizeof: the new members zeroed, nothing beyond.
  alignas(hearth_stats) unsigned char now[sizeof(hearth_stats) + 16];
  std::memset(now, 0xAB, sizeof(now));
  hearth_stats_init(reinterpret_cast<hearth_stats*>(now));
  const auto* n = reinterpret_cast<const hearth_stats*>(now);
  CHECK(n->struct_size == sizeof(hearth_stats));
  CHECK(n->accepted_tokens == 0);
  for (size_t i = sizeof(hearth_stats); i < sizeof(now); ++i) CHECK(now[i] == 0xAB);
}
