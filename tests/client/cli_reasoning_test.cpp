// hearth ask and a thinking model's reasoning, against the fake daemon: shown before the
// answer between "Thinking..." and "...done thinking." (as Ollama's CLI shows it; no colour
// when stdout is not a terminal), left out with --hide-thinking, its own field with --json;
// --think, --no-think and --think-budget sent as the daemon reads them. hearth chat shows it
// the same way and keeps it out of the history it sends back.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "fake_daemon.h"
#include "run_command.h"

using hearth::test::FakeDaemon;
using hearth::test::run_command;
using hearth::test::shell_quote;
using Json = nlohmann::json;

namespace {

std::string chunk(const std::string& delta_json, const std::string& finish = "null") {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
         delta_json + R"(,"finish_reason":)" + finish + "}]}";
}

// Streams or answers whole, as the request asks: reasoning "The user greets.", answer "Hi!".
void thinking_daemon(const FakeDaemon::Request& request, int fd) {
  using namespace hearth::test;
  if (Json::parse(request.body).value("stream", false)) {
    write_all(fd, sse_head() + sse_event(chunk(R"({"reasoning_content":"The user "})")) +
                      sse_event(chunk(R"({"reasoning_content":"greets."})")) +
                      sse_event(chunk(R"({"content":"Hi!"})", R"("stop")")) + http_chunk("data: [DONE]\n\n") +
                      last_chunk());
    return;
  }
  write_all(fd, http_response(200, "application/json",
                              R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hi!",)"
                              R"("reasoning_content":"The user greets."},"finish_reason":"stop"}]})"));
}

// thinking_daemon, and /health as hearth chat asks it first.
void thinking_chat_daemon(const FakeDaemon::Request& request, int fd) {
  using namespace hearth::test;
  if (request.head.rfind("GET /health", 0) == 0) {
    write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
    return;
  }
  thinking_daemon(request, fd);
}

hearth::test::CommandResult ask(const FakeDaemon& daemon, const std::string& args) {
  return run_command(shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) + " ask " + args);
}

}  // namespace

TEST_CASE("hearth ask shows the reasoning before the answer, and --hide-thinking leaves it out", "[client]") {
  FakeDaemon daemon(thinking_daemon);
  auto shown = ask(daemon, "hello");
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.out == "Thinking...\nThe user greets.\n...done thinking.\n\nHi!\n");
  CHECK(shown.out.find('\x1b') == std::string::npos);  // not a terminal: no colour codes
  auto hidden = ask(daemon, "--hide-thinking hello");
  REQUIRE(hidden.exit_code == 0);
  CHECK(hidden.out == "Hi!\n");
  CHECK(ask(daemon, "--hidethinking hello").out == "Hi!\n");  // Ollama's spelling
}

TEST_CASE("hearth ask --json gives the reasoning its own field", "[client]") {
  FakeDaemon daemon(thinking_daemon);
  auto r = ask(daemon, "--json hello");
  REQUIRE(r.exit_code == 0);
  const Json out = Json::parse(r.out);
  CHECK(out["text"] == "Hi!");
  CHECK(out["reasoning"] == "The user greets.");
  CHECK_FALSE(Json::parse(ask(daemon, "--json --hide-thinking hello").out).contains("reasoning"));
}

TEST_CASE("hearth ask --think, --no-think and --think-budget reach the request", "[client]") {
  FakeDaemon daemon(thinking_daemon);
  REQUIRE(ask(daemon, "hello").exit_code == 0);
  REQUIRE(ask(daemon, "--no-think hello").exit_code == 0);
  REQUIRE(ask(daemon, "--think --think-budget 64 hello").exit_code == 0);
  auto requests = daemon.requests();
  REQUIRE(requests.size() == 3);
  const Json plain = Json::parse(requests[0].body);
  CHECK_FALSE(plain.contains("reasoning_effort"));
  CHECK_FALSE(plain.contains("thinking_budget_tokens"));
  CHECK(Json::parse(requests[1].body)["reasoning_effort"] == "none");
  const Json on = Json::parse(requests[2].body);
  CHECK(on["chat_template_kwargs"]["enable_thinking"] == true);
  CHECK(on["thinking_budget_tokens"] == 64);
  // Refused before anything is sent.
  CHECK(ask(daemon, "--think --no-think hello").exit_code != 0);
  CHECK(ask(daemon, "--raw --no-think hello").exit_code != 0);
  CHECK(ask(daemon, "--think-budget 0 hello").exit_code != 0);
  CHECK(daemon.requests().size() == 3);
}

TEST_CASE("hearth chat shows the reasoning, keeps it out of the history, and takes the thinking flags", "[client]") {
  FakeDaemon daemon(thinking_chat_daemon);
  hearth::test::TempDir state;
  const std::string cli = "env XDG_STATE_HOME=" + shell_quote(state.path().string()) + " " +
                          shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) + " chat ";
  auto shown = run_command(cli + "--think-budget 32", "hello\nagain\n");
  REQUIRE(shown.exit_code == 0);
  const std::string turn = "Thinking...\nThe user greets.\n...done thinking.\n\nHi!\n";
  CHECK(shown.out == turn + turn);
  std::vector<Json> chats;
  for (const auto& r : daemon.requests())
    if (r.head.rfind("POST /v1/chat/completions", 0) == 0) chats.push_back(Json::parse(r.body));
  REQUIRE(chats.size() == 2);
  CHECK(chats[0]["thinking_budget_tokens"] == 32);
  const Json& second = chats[1]["messages"];
  REQUIRE(second.size() == 3);
  CHECK(second[1]["role"] == "assistant");
  CHECK(second[1]["content"] == "Hi!");
  CHECK_FALSE(second[1].contains("reasoning_content"));

  auto hidden = run_command(cli + "--hide-thinking --no-think --no-history", "hello\n");
  REQUIRE(hidden.exit_code == 0);
  CHECK(hidden.out == "Hi!\n");
  CHECK(Json::parse(daemon.requests().back().body)["reasoning_effort"] == "none");
}
