// Tool calls and schema'd answers through libhearth-client and the CLI, against hearthd on
// the default model (Qwen2.5-Coder 0.5B, whose template has a tool syntax). Needs the model
// file (scripts/fetch-model); without it the tests warn and pass.
#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hearth/client.h"
#include "hearthd_process.h"
#include "run_command.h"
#include "test_util.h"

namespace {

using hearth::test::HearthdProcess;
using Json = nlohmann::json;

const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string","description":"the city's name"}},)"
    R"("required":["city"]}}}])";

HearthdProcess* qwen_daemon() {
  static std::unique_ptr<HearthdProcess> daemon = []() -> std::unique_ptr<HearthdProcess> {
    std::string model = hearth::test::installed_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if (model.empty()) return nullptr;
    return std::make_unique<HearthdProcess>(model, std::vector<std::string>{"--ctx", "2048"});
  }();
  if (daemon && !daemon->ready()) FAIL("hearthd did not become ready; its log:\n" << daemon->log());
  return daemon.get();
}

struct Handle {
  explicit Handle(const HearthdProcess& daemon) {
    REQUIRE(hearth_client_open(daemon.socket_path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

int append(const char* piece, size_t len, void* user_data) {
  static_cast<std::string*>(user_data)->append(piece, len);
  return 0;
}

hearth_chat_message message(const char* role, const char* content) {
  hearth_chat_message m;
  hearth_chat_message_init(&m);
  m.role = role;
  m.content = content;
  return m;
}

// A call of get_weather as the grammar guarantees it: an id, the name, arguments that are a
// JSON object with the required string.
void check_weather_call(const hearth_tool_call& call) {
  INFO("arguments: " << call.arguments);
  CHECK(std::string(call.id).rfind("call_", 0) == 0);
  CHECK(std::string(call.name) == "get_weather");
  const Json args = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  REQUIRE(args.is_object());
  REQUIRE(args.contains("city"));
  CHECK(args["city"].is_string());
}

}  // namespace

TEST_CASE("the default model's tool call comes back well-formed, streamed or whole, and the result goes back in",
          "[client][model][tools]") {
  HearthdProcess* daemon = qwen_daemon();
  if (daemon == nullptr) {
    WARN("qwen2.5-coder-0.5b not installed (scripts/fetch-model): skipped");
    return;
  }
  Handle h(*daemon);
  hearth_chat_message ask = message("user", "What is the weather in Paris?");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.temperature = 0;
  o.max_tokens = 64;
  o.tools = kTools;
  o.tool_choice = "required";

  // Streamed: the callback gets no piece of the arguments.
  std::string streamed;
  hearth_tool_call* calls = nullptr;
  size_t n_calls = 0;
  hearth_stats stats;
  hearth_stats_init(&stats);
  int rc = hearth_client_chat_v2(h.client, &ask, 1, &o, append, &streamed, nullptr, &calls, &n_calls, &stats);
  INFO(hearth_client_last_error(h.client));
  REQUIRE(rc == HEARTH_OK);
  CHECK(streamed.empty());
  CHECK(stats.finish_reason == HEARTH_FINISH_TOOL_CALLS);
  REQUIRE(n_calls >= 1);
  check_weather_call(calls[0]);
  const std::string streamed_arguments = calls[0].arguments;

  // Whole: the same call (greedy), with another id.
  hearth_tool_call* whole = nullptr;
  size_t n_whole = 0;
  REQUIRE(hearth_client_chat_v2(h.client, &ask, 1, &o, nullptr, nullptr, nullptr, &whole, &n_whole, nullptr) ==
          HEARTH_OK);
  REQUIRE(n_whole == n_calls);
  check_weather_call(whole[0]);
  CHECK(std::string(whole[0].arguments) == streamed_arguments);
  CHECK(std::string(whole[0].id) != calls[0].id);
  hearth_free(whole);

  // The next turn: the assistant's call and the tool's result; the model answers in text.
  hearth_chat_message turn[3] = {ask, message("assistant", nullptr),
                                 message("tool", R"({"celsius": 18, "sky": "clear"})")};
  turn[1].tool_calls = calls;
  turn[1].n_tool_calls = 1;
  turn[2].tool_call_id = calls[0].id;
  o.tool_choice = "none";
  char* text = nullptr;
  rc = hearth_client_chat_v2(h.client, turn, 3, &o, nullptr, nullptr, &text, nullptr, nullptr, &stats);
  INFO(hearth_client_last_error(h.client));
  REQUIRE(rc == HEARTH_OK);
  REQUIRE(text != nullptr);
  INFO("answer: " << text);
  CHECK(std::string(text).size() > 0);
  CHECK(stats.finish_reason != HEARTH_FINISH_TOOL_CALLS);
  hearth_free(text);
  hearth_free(calls);
}

TEST_CASE("the default model's answer under a JSON Schema fits it", "[client][model][tools]") {
  HearthdProcess* daemon = qwen_daemon();
  if (daemon == nullptr) {
    WARN("qwen2.5-coder-0.5b not installed (scripts/fetch-model): skipped");
    return;
  }
  Handle h(*daemon);
  hearth_chat_message ask = message("user", "Describe Paris: its name, and whether it is a capital.");
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.temperature = 0;
  o.max_tokens = 64;
  o.response_format = HEARTH_FORMAT_JSON_SCHEMA;
  o.json_schema = R"({"type":"object","properties":{"name":{"type":"string"},"capital":{"type":"boolean"}},)"
                  R"("required":["name","capital"]})";
  char* text = nullptr;
  REQUIRE(hearth_client_chat_v2(h.client, &ask, 1, &o, nullptr, nullptr, &text, nullptr, nullptr, nullptr) ==
          HEARTH_OK);
  INFO("answer: " << text);
  const Json answer = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  hearth_free(text);
  REQUIRE(answer.is_object());
  CHECK(answer["name"].is_string());
  CHECK(answer["capital"].is_boolean());
}

TEST_CASE("hearth ask --tools on the default model prints the call as a JSON line", "[cli][model][tools]") {
  HearthdProcess* daemon = qwen_daemon();
  if (daemon == nullptr) {
    WARN("qwen2.5-coder-0.5b not installed (scripts/fetch-model): skipped");
    return;
  }
  hearth::test::TempDir dir;
  const std::string tools = dir.file("tools.json");
  std::ofstream(tools) << kTools;
  using hearth::test::shell_quote;
  auto r = hearth::test::run_command(shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon->socket_path()) +
                                     " ask --temp 0 --max-tokens 64 --tools " + shell_quote(tools) +
                                     " --tool-choice get_weather 'What is the weather in Oslo?'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  INFO(r.out);
  const Json call = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);  // one line: the call alone
  REQUIRE(call.is_object());
  CHECK(call["name"] == "get_weather");
  CHECK(call["arguments"]["city"].is_string());
  CHECK(call["id"].get<std::string>().rfind("call_", 0) == 0);
}
