// `hearth ask --tools FILE`, `--tool-choice`, `--json-schema FILE` and `--json-object`: what
// the CLI sends, how it prints tool calls (one JSON line each, after the text), and how it
// refuses a bad file before asking anything. The CLI runs as a child process against a
// scripted daemon.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fake_daemon.h"
#include "run_command.h"

namespace {

using hearth::test::FakeDaemon;
using hearth::test::run_command;
using hearth::test::shell_quote;
using hearth::test::TempDir;
using Json = nlohmann::json;

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","description":"The weather in a city",)"
                     R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

std::string chunk(const std::string& delta_json, const std::string& finish = "null") {
  return R"({"choices":[{"index":0,"delta":)" + delta_json + R"(,"finish_reason":)" + finish + "}]}";
}

// Streams `text` (if any), then a call of get_weather for each city, its arguments in two
// pieces; a request without "stream" gets the same as one JSON answer.
FakeDaemon::Handler answer(const std::string& text, const std::vector<std::string>& cities) {
  return [text, cities](const FakeDaemon::Request& r, int fd) {
    using namespace hearth::test;
    const Json request = Json::parse(r.body);
    if (!request.value("stream", false)) {
      Json message = {{"role", "assistant"}, {"content", text}, {"tool_calls", Json::array()}};
      for (size_t i = 0; i < cities.size(); ++i) {
        message["tool_calls"].push_back(
            {{"id", "call_" + std::to_string(i)},
             {"type", "function"},
             {"function", {{"name", "get_weather"}, {"arguments", R"({"city": ")" + cities[i] + "\"}"}}}});
      }
      const Json body = {{"choices", {{{"index", 0}, {"message", message}, {"finish_reason", "tool_calls"}}}}};
      write_all(fd, http_response(200, "application/json", body.dump()));
      return;
    }
    std::string s = sse_head();
    if (!text.empty()) s += sse_event(chunk(Json{{"content", text}}.dump()));
    for (size_t i = 0; i < cities.size(); ++i) {
      const std::string index = std::to_string(i);
      s += sse_event(chunk(R"({"tool_calls":[{"index":)" + index + R"(,"id":"call_)" + index +
                           R"(","type":"function","function":{"name":"get_weather","arguments":""}}]})"));
      s += sse_event(chunk(R"({"tool_calls":[{"index":)" + index + R"(,"function":{"arguments":"{\"city\": \""}}]})"));
      s += sse_event(
          chunk(R"({"tool_calls":[{"index":)" + index + R"(,"function":{"arguments":")" + cities[i] + R"(\"}"}}]})"));
    }
    s += sse_event(chunk("{}", cities.empty() ? R"("stop")" : R"("tool_calls")"));
    write_all(fd, s + http_chunk("data: [DONE]\n\n") + last_chunk());
  };
}

// A file in dir holding text.
std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

hearth::test::CommandResult ask(const FakeDaemon& daemon, const std::string& args) {
  return run_command(shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) + " ask " + args);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("hearth ask --tools sends the file's tools and prints each call as one JSON line after the text",
          "[cli][tools]") {
  TempDir dir;
  FakeDaemon daemon(answer("Let me check.", {"Paris", "Oslo"}));
  const std::string tools = write_file(dir, "tools.json", kTools);
  auto r = ask(daemon, "--tools " + shell_quote(tools) + " 'Weather in Paris and Oslo?'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> out = lines(r.out);
  REQUIRE(out.size() == 3);
  CHECK(out[0] == "Let me check.");
  // Keys in this order, the arguments an object.
  CHECK(out[1] == R"({"id":"call_0","name":"get_weather","arguments":{"city":"Paris"}})");
  CHECK(out[2] == R"({"id":"call_1","name":"get_weather","arguments":{"city":"Oslo"}})");

  const Json body = Json::parse(daemon.requests().at(0).body);
  CHECK(body["tools"] == Json::parse(kTools));
  CHECK_FALSE(body.contains("tool_choice"));
  CHECK(body["messages"] == Json::parse(R"([{"role":"user","content":"Weather in Paris and Oslo?"}])"));
}

TEST_CASE("an answer that only calls prints JSON lines alone, and --json puts the calls in its object",
          "[cli][tools]") {
  TempDir dir;
  FakeDaemon daemon(answer("", {"Paris"}));
  const std::string tools = write_file(dir, "tools.json", kTools);
  auto r = ask(daemon, "--tools " + shell_quote(tools) + " 'Weather in Paris?'");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "{\"id\":\"call_0\",\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n");

  r = ask(daemon, "--json --tools " + shell_quote(tools) + " 'Weather in Paris?'");
  REQUIRE(r.exit_code == 0);
  const Json out = Json::parse(r.out);
  CHECK(out["text"] == "");
  CHECK(out["finish_reason"] == "tool_calls");
  CHECK(out["tool_calls"] == Json::parse(R"([{"id":"call_0","name":"get_weather","arguments":{"city":"Paris"}}])"));
}

TEST_CASE("hearth ask --tool-choice sends auto, required, none as they are and a name as OpenAI's function object",
          "[cli][tools]") {
  TempDir dir;
  FakeDaemon daemon(answer("", {"Paris"}));
  const std::string tools = write_file(dir, "tools.json", kTools);
  for (const char* choice : {"auto", "required", "none"}) {
    REQUIRE(ask(daemon, "--tools " + shell_quote(tools) + " --tool-choice " + choice + " q").exit_code == 0);
    CHECK(Json::parse(daemon.requests().back().body)["tool_choice"] == choice);
  }
  REQUIRE(ask(daemon, "--tools " + shell_quote(tools) + " --tool-choice get_weather q").exit_code == 0);
  CHECK(Json::parse(daemon.requests().back().body)["tool_choice"] ==
        Json::parse(R"({"type":"function","function":{"name":"get_weather"}})"));
}

TEST_CASE("a tools or schema file that cannot be used is an error naming it, and nothing is asked", "[cli][tools]") {
  TempDir dir;
  FakeDaemon daemon(answer("", {"Paris"}));
  const std::string missing = dir.file("missing.json");
  const std::string broken = write_file(dir, "broken.json", "[{\"type\": \"function\",");
  const std::string object = write_file(dir, "object.json", R"({"type":"function"})");
  const std::string nameless = write_file(dir, "nameless.json", R"([{"type":"function","function":{}}])");
  const std::string tools = write_file(dir, "tools.json", kTools);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tools " + shell_quote(missing) + " q", "--tools " + missing + ": No such file or directory"},
      {"--tools " + shell_quote(broken) + " q", "--tools " + broken + " is not JSON: "},
      {"--tools " + shell_quote(object) + " q", "--tools " + object + ": must hold an array of tools"},
      {"--tools " + shell_quote(nameless) + " q", "tool 0 is not {\"type\": \"function\", \"function\": {\"name\""},
      {"--json-schema " + shell_quote(broken) + " q", "--json-schema " + broken + " is not JSON: "},
      {"--json-schema " + shell_quote(tools) + " q", "must hold a JSON Schema (an object)"},
      {"--tool-choice auto q", "--tool-choice needs --tools"},
      {"--raw --tools " + shell_quote(tools) + " q", "--tools needs the chat template"},
      {"--json-object --json-schema " + shell_quote(object) + " q", "--json-object and --json-schema"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    auto r = ask(daemon, args);
    CHECK(r.exit_code == 1);  // a usage error (2 is "no daemon")
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(r.out.empty());
  }
  CHECK(daemon.requests().empty());
}

TEST_CASE("hearth ask --json-schema sends the file's schema as response_format and --json-object asks for any object",
          "[cli][tools]") {
  TempDir dir;
  FakeDaemon daemon(answer("{\"n\": 1}", {}));
  const char* schema = R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})";
  const std::string file = write_file(dir, "schema.json", schema);
  auto r = ask(daemon, "--json-schema " + shell_quote(file) + " q");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "{\"n\": 1}\n");
  CHECK(Json::parse(daemon.requests().back().body)["response_format"] ==
        Json::parse(R"({"type":"json_schema","json_schema":{"schema":)" + std::string(schema) + "}}"));

  REQUIRE(ask(daemon, "--json-object q").exit_code == 0);
  CHECK(Json::parse(daemon.requests().back().body)["response_format"] == Json::parse(R"({"type":"json_object"})"));
}

TEST_CASE("hearth ask --help names the tool and format options", "[cli][tools]") {
  auto r = run_command(shell_quote(HEARTH_CLI_PATH) + " ask --help");
  CHECK(r.exit_code == 0);
  for (const char* option : {"--tools", "--tool-choice", "--json-schema", "--json-object"}) {
    INFO(option);
    CHECK_THAT(r.out, Catch::Contains(option));
  }
}
