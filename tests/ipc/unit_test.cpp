// The pure parts of ipc, without sockets: Host checks, HOST:PORT parsing, request
// validation defaults, finish_reason mapping.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ipc/api/openai_request.h"
#include "ipc/api/openai_response.h"
#include "ipc/route_table.h"
#include "ipc/socket_path.h"

using namespace hearth;
using namespace hearth::ipc;

TEST_CASE("Loopback Host headers are localhost, 127/8 and [::1], with an optional port") {
  for (const char* h : {"localhost", "LocalHost:80", "127.0.0.1", "127.255.0.9:65535", "[::1]", "[::1]:1",
                        "[0:0:0:0:0:0:0:1]", "localhost."}) {
    INFO(h);
    REQUIRE(is_loopback_host(h));
  }
  for (const char* h : {"", "evil.com", "localhost.evil.com", "127.0.0.1.nip.io", "128.0.0.1", "[::2]", "::1",
                        "localhost:", "localhost:http", "[::1]x", "127.0.0.1:1:2", "0177.0.0.1", "2130706433"}) {
    INFO(h);
    REQUIRE(!is_loopback_host(h));
  }
}

TEST_CASE("HOST:PORT parsing") {
  auto a = parse_host_port("127.0.0.1:8080");
  REQUIRE(a.ok());
  REQUIRE(a->host == "127.0.0.1");
  REQUIRE(a->port == 8080);
  auto b = parse_host_port("[::1]:9");
  REQUIRE(b.ok());
  REQUIRE(b->host == "::1");
  REQUIRE(b->port == 9);
  REQUIRE(parse_host_port("localhost:1")->host == "127.0.0.1");
  for (const char* bad : {"", "127.0.0.1", ":80", "host:", "host:65536", "host:-1", "::1:80", "[::1]80", "[::1]"}) {
    INFO(bad);
    REQUIRE(!parse_host_port(bad).ok());
  }
}

TEST_CASE("Absent fields take OpenAI's defaults and null counts as absent") {
  nlohmann::json body = nlohmann::json::parse(R"({"prompt":"x","temperature":null,"stop":null,"n":null})");
  auto parsed = parse_openai_request(Endpoint::Completions, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  REQUIRE(r.sampling.temperature == 1.0f);
  REQUIRE(r.sampling.top_p == 1.0f);
  REQUIRE(r.sampling.top_k == 0);
  REQUIRE(r.sampling.min_p == 0.0f);
  REQUIRE(r.sampling.seed == kRandomSeed);
  REQUIRE(r.max_tokens == -1);
  REQUIRE(!r.stream);
  REQUIRE(r.stop.empty());
}

TEST_CASE("A request names the model by its id or an alias, any other name is 404") {
  const std::vector<std::string> aliases{"qwen2.5-coder:0.5b"};
  for (const char* name : {"m", "qwen2.5-coder:0.5b"}) {
    INFO(name);
    nlohmann::json body{{"prompt", "x"}, {"model", name}};
    REQUIRE(std::holds_alternative<OpenAiRequest>(parse_openai_request(Endpoint::Completions, body, "m", aliases)));
  }
  nlohmann::json other{{"prompt", "x"}, {"model", "qwen2.5-coder:1.5b"}};
  auto parsed = parse_openai_request(Endpoint::Completions, other, "m", aliases);
  REQUIRE(std::holds_alternative<ApiError>(parsed));
  REQUIRE(std::get<ApiError>(parsed).status == 404);
}

TEST_CASE("Text parts are kept as parts and joined with newlines for string templates") {
  nlohmann::json body = nlohmann::json::parse(
      R"({"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"a"},
          {"type":"text","text":"b"}]},{"role":"assistant","content":"plain"}]})");
  auto parsed = parse_openai_request(Endpoint::Chat, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "user");
  CHECK(r.messages[0].parts == std::vector<std::string>{"", "a", "b"});
  CHECK(r.messages[0].content == "a\nb");  // no newline before the first non-empty text
  CHECK(r.messages[1].parts.empty());
  CHECK(r.messages[1].content == "plain");

  auto image = parse_openai_request(
      Endpoint::Chat,
      nlohmann::json::parse(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"), "m");
  REQUIRE(std::holds_alternative<ApiError>(image));
}

TEST_CASE("tools are read in the client's order and validated: function tools, unique names, object parameters") {
  // Parsed as the server parses bodies: keys in the client's order.
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(R"({"messages":[{"role":"user","content":"u"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":
                 {"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}},"strict":true}},
               {"function":{"name":"noop"},"type":"function"}],
      "tool_choice":{"type":"function","function":{"name":"noop"}},"parallel_tool_calls":false})");
  auto parsed = parse_openai_request(Endpoint::Chat, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  REQUIRE(r.tools.size() == 2);
  CHECK(r.tools[0].name == "get_weather");
  CHECK(r.tools[0].description == "Weather");
  CHECK(r.tools[0].strict);
  CHECK(r.tools[0].parameters.find(R"("zeta":{"type":"string"},"alpha")") != std::string::npos);  // as sent
  CHECK(r.tools[1].json.rfind(R"({"function":{"name":"noop"},"type":"function"})", 0) == 0);
  CHECK(r.tools[1].parameters == R"({"type": "object", "properties": {}})");
  CHECK(r.tool_choice == ToolChoice::Named);
  CHECK(r.tool_choice_name == "noop");
  CHECK(!r.parallel_tool_calls);

  auto error_of = [](const char* json_text) {
    auto p = parse_openai_request(Endpoint::Chat, nlohmann::json::parse(json_text), "m");
    REQUIRE(std::holds_alternative<ApiError>(p));
    return std::get<ApiError>(p);
  };
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],"tools":[{"type":"function","function":{"name":"a"}},
                     {"type":"function","function":{"name":"a"}}]})")
            .param == "tools[1].function.name");
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],
                     "tools":[{"type":"function","function":{"name":"a","parameters":{"type":"string"}}}]})")
            .param == "tools[0].function.parameters");
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],"tools":[{"type":"code_interpreter"}]})").param ==
        "tools[0].type");
  CHECK(error_of(
            R"({"messages":[{"role":"user","content":"u"}],"tools":[{"type":"function","function":{"name":"a b"}}]})")
            .param == "tools[0].function.name");
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],"tools":[{"type":"function","function":{"name":"a"}}],
                     "tool_choice":{"type":"function","function":{"name":"b"}}})")
            .param == "tool_choice");
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],"tool_choice":"required"})").param == "tool_choice");
  CHECK(error_of(R"({"messages":[{"role":"user","content":"u"}],"functions":[{"name":"f"}]})").message.find("tools") !=
        std::string::npos);
}

TEST_CASE("a conversation with tool calls: assistant calls without content, tool results answering them") {
  const nlohmann::json body = nlohmann::json::parse(R"({"messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Lyon\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"12 C"}]})");
  auto parsed = parse_openai_request(Endpoint::Chat, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  REQUIRE(r.messages.size() == 3);
  REQUIRE(r.messages[1].tool_calls.size() == 1);
  CHECK(r.messages[1].content.empty());
  CHECK(r.messages[1].tool_calls[0].id == "call_1");
  CHECK(r.messages[1].tool_calls[0].arguments == R"({"city": "Lyon"})");
  CHECK(r.messages[2].role == "tool");
  CHECK(r.messages[2].tool_call_id == "call_1");

  nlohmann::json bad = body;
  bad["messages"][2]["tool_call_id"] = "call_2";
  auto unknown = parse_openai_request(Endpoint::Chat, bad, "m");
  REQUIRE(std::holds_alternative<ApiError>(unknown));
  CHECK(std::get<ApiError>(unknown).param == "messages[2].tool_call_id");
  bad = body;
  bad["messages"][1]["tool_calls"][0]["function"]["arguments"] = "not json";
  auto args = parse_openai_request(Endpoint::Chat, bad, "m");
  REQUIRE(std::holds_alternative<ApiError>(args));
  CHECK(std::get<ApiError>(args).param == "messages[1].tool_calls[0].function.arguments");
  bad = body;
  bad["messages"][2].erase("tool_call_id");
  CHECK(std::holds_alternative<ApiError>(parse_openai_request(Endpoint::Chat, bad, "m")));
}

TEST_CASE("Given fields are carried over and max_completion_tokens wins over max_tokens") {
  nlohmann::json body = nlohmann::json::parse(
      R"({"messages":[{"role":"developer","content":"s"},{"role":"user","content":"u"}],"model":"m",
          "max_tokens":5,"max_completion_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":20,"min_p":0.1,
          "seed":42,"stop":["a","","b"],"presence_penalty":0.5,"frequency_penalty":-0.5,
          "repetition_penalty":1.1,"stream":true,"stream_options":{"include_usage":true}})");
  auto parsed = parse_openai_request(Endpoint::Chat, body, "m");
  REQUIRE(std::holds_alternative<OpenAiRequest>(parsed));
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  REQUIRE(r.messages.size() == 2);
  REQUIRE(r.messages[0].role == "system");
  REQUIRE(r.max_tokens == 7);
  REQUIRE(r.sampling.temperature == 0.5f);
  REQUIRE(r.sampling.top_p == 0.9f);
  REQUIRE(r.sampling.top_k == 20);
  REQUIRE(r.sampling.min_p == 0.1f);
  REQUIRE(r.sampling.seed == 42u);
  REQUIRE(r.stop == std::vector<std::string>{"a", "b"});
  REQUIRE(r.sampling.presence_penalty == 0.5f);
  REQUIRE(r.sampling.frequency_penalty == -0.5f);
  REQUIRE(r.sampling.repetition_penalty == 1.1f);
  REQUIRE(r.stream);
  REQUIRE(r.include_usage);
}

TEST_CASE("finish_reason: stop and length pass through, cancelled reads as length") {
  REQUIRE(openai_finish_reason("stop") == "stop");
  REQUIRE(openai_finish_reason("length") == "length");
  REQUIRE(openai_finish_reason("cancelled") == "length");
}

TEST_CASE("No route of the table is shadowed by another: each method and path reaches its own entry") {
  const std::span<const RouteEntry> table = route_table();
  REQUIRE(!table.empty());
  for (size_t i = 0; i < table.size(); ++i) {
    const RouteEntry& r = table[i];
    INFO(r.method << " " << r.path);
    // A path the entry serves: its own, or for a prefix route the prefix with a rest.
    std::string path = r.path;
    if (path.size() >= 2 && path.substr(path.size() - 2) == "/*") path = path.substr(0, path.size() - 1) + "x";
    std::string_view tail;
    REQUIRE(path_matches(r, path, &tail));
    for (size_t j = 0; j < i; ++j) {
      const RouteEntry& earlier = table[j];
      INFO("earlier: " << earlier.method << " " << earlier.path);
      CHECK(!(std::string_view(earlier.method) == r.method && path_matches(earlier, path, &tail)));
    }
  }
}

TEST_CASE("speculative: false opts a request out of speculative decoding, and anything but a boolean is 400") {
  const auto body = [](const char* extra) {
    return nlohmann::json::parse(std::string(R"({"messages":[{"role":"user","content":"x"}])") + extra + "}");
  };
  auto on = hearth::ipc::parse_openai_request(hearth::ipc::Endpoint::Chat, body(""), "m");
  REQUIRE(std::holds_alternative<hearth::ipc::OpenAiRequest>(on));
  CHECK(std::get<hearth::ipc::OpenAiRequest>(on).speculative);
  auto off = hearth::ipc::parse_openai_request(hearth::ipc::Endpoint::Completions,
                                               nlohmann::json::parse(R"({"prompt":"x","speculative":false})"), "m");
  REQUIRE(std::holds_alternative<hearth::ipc::OpenAiRequest>(off));
  CHECK_FALSE(std::get<hearth::ipc::OpenAiRequest>(off).speculative);
  auto bad = hearth::ipc::parse_openai_request(hearth::ipc::Endpoint::Chat, body(R"(,"speculative":1)"), "m");
  REQUIRE(std::holds_alternative<hearth::ipc::ApiError>(bad));
  CHECK(std::get<hearth::ipc::ApiError>(bad).param == "speculative");
}
