// libhearth-client against hearthd on the default model (Gemma 3 270M): many concurrent
// streams, real cancellation timing, and the CLI's answer. Needs the model file
// (scripts/fetch-model); without it the tests warn and pass.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hearth/client.h"
#include "hearthd_process.h"
#include "run_command.h"
#include "test_util.h"

namespace {

using hearth::test::HearthdProcess;
using Clock = std::chrono::steady_clock;  // for the timings printed, never asserted

constexpr int kClients = 16;
constexpr int32_t kMaxTokens = 24;

// One daemon for the program (loading the model takes seconds); nullptr without the model.
HearthdProcess* model_daemon() {
  static std::unique_ptr<HearthdProcess> daemon = []() -> std::unique_ptr<HearthdProcess> {
    std::string model = hearth::test::gemma_model_path();
    if (model.empty()) return nullptr;
    return std::make_unique<HearthdProcess>(
        model, std::vector<std::string>{"--parallel", "8", "--queue-max", "64", "--ctx", "1024"});
  }();
  if (daemon && !daemon->ready()) FAIL("hearthd did not become ready; its log:\n" << daemon->log());
  return daemon.get();
}

int append(const char* piece, size_t len, void* user_data) {
  static_cast<std::string*>(user_data)->append(piece, len);
  return 0;
}

// Greedy streamed chat on its own handle; the text, or "<error: ...>".
std::string ask(const std::string& socket, const std::string& question) {
  hearth_client* client = nullptr;
  if (hearth_client_open(socket.c_str(), &client) != HEARTH_OK) return "<error: open>";
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.temperature = 0;
  o.max_tokens = kMaxTokens;
  hearth_message m{"user", question.c_str()};
  std::string text;
  int rc = hearth_client_chat(client, &m, 1, &o, append, &text, nullptr, nullptr);
  if (rc != HEARTH_OK)
    text = std::string("<error: ") + hearth_strerror(rc) + ": " + hearth_client_last_error(client) + ">";
  hearth_client_close(client);
  return text;
}

}  // namespace

TEST_CASE("16 concurrent streaming clients all finish and each greedy output equals the same request alone",
          "[client][model]") {
  HearthdProcess* daemon = model_daemon();
  if (daemon == nullptr) {
    WARN("default model not installed (scripts/fetch-model): skipped");
    return;
  }
  std::vector<std::string> questions;
  for (int i = 0; i < kClients; ++i) {
    questions.push_back("Question " + std::to_string(i + 1) + ": what is " + std::to_string(i + 2) + " times " +
                        std::to_string(3 * i + 1) + "? Answer in one sentence.");
  }
  auto alone_start = Clock::now();
  std::vector<std::string> alone;
  for (const std::string& q : questions) alone.push_back(ask(daemon->socket_path(), q));
  auto alone_seconds = std::chrono::duration<double>(Clock::now() - alone_start).count();

  std::vector<std::string> together(kClients);
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] { together[i] = ask(daemon->socket_path(), questions[i]); });
  }
  for (std::thread& t : threads) t.join();
  auto seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "client_model_tests: 16 requests one by one %.1f s, concurrently %.1f s\n", alone_seconds,
               seconds);
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i << ": " << questions[i]);
    CHECK(alone[i].rfind("<error", 0) != 0);
    CHECK_FALSE(alone[i].empty());
    CHECK(together[i] == alone[i]);
  }
}

TEST_CASE("hearth_client_cancel mid-stream on the real model ends the stream long before its end", "[client][model]") {
  HearthdProcess* daemon = model_daemon();
  if (daemon == nullptr) {
    WARN("default model not installed (scripts/fetch-model): skipped");
    return;
  }
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(daemon->socket_path().c_str(), &client) == HEARTH_OK);
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.temperature = 0;
  o.max_tokens = 400;
  // The third piece's callback holds the stream until the other thread has cancelled, so
  // the cancel lands mid-stream however slowly either thread runs; afterwards at most what
  // the client had already read may still be handed over, far from the 400 tokens.
  struct State {
    std::atomic<int> pieces{0};
    std::atomic<bool> cancelled{false};
  } state;
  auto count = [](const char*, size_t, void* user_data) -> int {
    auto* st = static_cast<State*>(user_data);
    if (++st->pieces == 3)
      while (!st->cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  };
  std::thread canceller([&] {
    while (state.pieces < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hearth_client_cancel(client);
    state.cancelled = true;
  });
  hearth_message m{"user", "Write a long essay about the history of bread."};
  hearth_stats stats;
  hearth_stats_init(&stats);
  int rc = hearth_client_chat(client, &m, 1, &o, count, &state, nullptr, &stats);
  canceller.join();
  CHECK(rc == HEARTH_ERR_CANCELLED);
  CHECK(state.pieces < 300);
  // The daemon goes on serving.
  CHECK(hearth_client_health(client) == HEARTH_OK);
  hearth_client_close(client);
}

TEST_CASE("hearth ask --stats prints an answer and its stats from the real model", "[client][model]") {
  HearthdProcess* daemon = model_daemon();
  if (daemon == nullptr) {
    WARN("default model not installed (scripts/fetch-model): skipped");
    return;
  }
  using hearth::test::shell_quote;
  auto r = hearth::test::run_command(shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon->socket_path()) +
                                     " ask --stats --temp 0 --max-tokens 16 " +
                                     shell_quote("What is the capital of France?"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.size() > 2);
  CHECK(r.err.find("ttft") != std::string::npos);
  CHECK(r.err.find("decode") != std::string::npos);
}
