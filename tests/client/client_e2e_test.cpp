// libhearth-client and the `hearth` CLI against a real hearthd serving the tiny synthetic
// model (tests/tools; random weights, so the text is gibberish, but greedy decoding is
// deterministic, which is all these tests compare).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "hearth/client.h"
#include "hearthd_process.h"
#include "run_command.h"
#include "tests/tools/synthetic_model.h"

namespace {

using hearth::test::HearthdProcess;
using hearth::test::run_command;
using hearth::test::shell_quote;
using hearth::test::TempDir;

// One daemon on the synthetic gemma3 model for the whole test program.
HearthdProcess& synthetic_daemon() {
  static TempDir model_dir;
  static std::string model = [] {
    hearth::test::SyntheticOptions o;
    o.arch = "gemma3";
    auto bytes = hearth::test::make_synthetic_model(o);
    REQUIRE(bytes.ok());
    std::string path = model_dir.file("synthetic.gguf");
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    return path;
  }();
  static HearthdProcess daemon(model, {"--parallel", "4", "--queue-max", "64"});
  if (!daemon.ready()) FAIL("hearthd did not become ready; its log:\n" << daemon.log());
  return daemon;
}

struct Handle {
  Handle() { REQUIRE(hearth_client_open(synthetic_daemon().socket_path().c_str(), &client) == HEARTH_OK); }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

hearth_request_options greedy(int32_t max_tokens) {
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.temperature = 0;
  o.max_tokens = max_tokens;
  return o;
}

int append(const char* piece, size_t len, void* user_data) {
  static_cast<std::string*>(user_data)->append(piece, len);
  return 0;
}

}  // namespace

TEST_CASE("streamed and non-streamed greedy chat give the same text, with stats", "[client][e2e]") {
  Handle h;
  hearth_request_options o = greedy(16);
  hearth_message messages[] = {{"system", "You are terse."}, {"user", "Name three colours."}};

  std::string streamed, kept;
  char* text = nullptr;
  hearth_stats s;
  hearth_stats_init(&s);
  REQUIRE(hearth_client_chat(h.client, messages, 2, &o, append, &streamed, &text, &s) == HEARTH_OK);
  REQUIRE(text != nullptr);
  kept = text;
  hearth_free(text);
  CHECK(kept == streamed);
  CHECK(s.prompt_tokens > 0);
  CHECK(s.completion_tokens > 0);
  CHECK(s.completion_tokens <= 16);
  CHECK(s.ttft_ms > 0);
  CHECK(s.finish_reason != HEARTH_FINISH_NONE);

  char* whole = nullptr;
  hearth_stats n;
  hearth_stats_init(&n);
  REQUIRE(hearth_client_chat(h.client, messages, 2, &o, nullptr, nullptr, &whole, &n) == HEARTH_OK);
  REQUIRE(whole != nullptr);
  CHECK(std::string(whole) == streamed);
  hearth_free(whole);
  CHECK(n.prompt_tokens == s.prompt_tokens);
  CHECK(n.completion_tokens == s.completion_tokens);
  CHECK(n.ttft_ms > 0);
  CHECK(n.finish_reason == s.finish_reason);
}

TEST_CASE("streamed and non-streamed greedy completion give the same text, with stats", "[client][e2e]") {
  Handle h;
  hearth_request_options o = greedy(12);
  std::string streamed;
  hearth_stats s;
  hearth_stats_init(&s);
  REQUIRE(hearth_client_complete(h.client, "Once upon a time", &o, append, &streamed, nullptr, &s) == HEARTH_OK);
  CHECK(s.prompt_tokens > 0);
  CHECK(s.completion_tokens > 0);
  CHECK(s.ttft_ms > 0);
  char* whole = nullptr;
  REQUIRE(hearth_client_complete(h.client, "Once upon a time", &o, nullptr, nullptr, &whole, nullptr) == HEARTH_OK);
  REQUIRE(whole != nullptr);
  CHECK(std::string(whole) == streamed);
  hearth_free(whole);
}

TEST_CASE("health, models and the daemon's errors through the library", "[client][e2e]") {
  Handle h;
  CHECK(hearth_client_health(h.client) == HEARTH_OK);
  hearth_model_info* models = nullptr;
  size_t n = 0;
  REQUIRE(hearth_client_list_models(h.client, &models, &n) == HEARTH_OK);
  REQUIRE(n == 1);
  CHECK(std::string(models[0].id) == "synthetic");
  hearth_free(models);

  hearth_request_options o = greedy(4);
  o.model = "no-such-model";
  hearth_message m{"user", "hi"};
  CHECK(hearth_client_chat(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_BAD_REQUEST);
  CHECK(hearth_client_http_status(h.client) == 404);
  CHECK(std::string(hearth_client_last_error(h.client)).size() > 0);
  o = greedy(4);
  o.temperature = 1e6f;  // out of range
  CHECK(hearth_client_chat(h.client, &m, 1, &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_BAD_REQUEST);
  CHECK(hearth_client_http_status(h.client) == 400);
}

TEST_CASE("hearth_client_cancel from another thread mid-stream returns HEARTH_ERR_CANCELLED promptly",
          "[client][e2e]") {
  Handle h;
  hearth_request_options o = greedy(200);
  // The first piece's callback holds the stream until the other thread has cancelled, so the
  // tiny model cannot finish first: a client that ignored the cancel would read the stream to
  // its end and return HEARTH_OK. (That the call returns before a stream that never ends is
  // checked against a stalling fake daemon in client_protocol_test.cpp.)
  struct State {
    std::atomic<bool> first{false};
    std::atomic<bool> cancelled{false};
  } state;
  auto on_piece = [](const char*, size_t, void* user_data) -> int {
    auto* st = static_cast<State*>(user_data);
    st->first = true;
    while (!st->cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  };
  std::thread canceller([&] {
    while (!state.first) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hearth_client_cancel(h.client);
    state.cancelled = true;
  });
  hearth_message m{"user", "Tell me a long story."};
  int rc = hearth_client_chat(h.client, &m, 1, &o, on_piece, &state, nullptr, nullptr);
  canceller.join();
  CHECK(rc == HEARTH_ERR_CANCELLED);
  // The daemon goes on serving, and the same handle works again.
  std::string text;
  CHECK(hearth_client_chat(h.client, &m, 1, &o, append, &text, nullptr, nullptr) == HEARTH_OK);
}

TEST_CASE("hearth ask --stats, --json, models, status and chat work against hearthd", "[client][e2e]") {
  std::string cli = shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(synthetic_daemon().socket_path()) + " ";

  auto ask = run_command(cli + "ask --stats --temp 0 --max-tokens 8 " + shell_quote("Say hi"));
  INFO(ask.err);
  CHECK(ask.exit_code == 0);
  CHECK(ask.err.find("ttft") != std::string::npos);
  CHECK(ask.err.find("itl") != std::string::npos);
  CHECK(ask.err.find("prefill") != std::string::npos);
  CHECK(ask.err.find("decode") != std::string::npos);
  CHECK(ask.err.find("cached") != std::string::npos);

  // The question may come on stdin; --json gives one object with the same greedy text.
  auto json = run_command(cli + "ask --json --temp 0 --max-tokens 8", "Say hi\n");
  CHECK(json.exit_code == 0);
  auto object = nlohmann::json::parse(json.out, nullptr, false);
  REQUIRE_FALSE(object.is_discarded());
  CHECK(object["usage"]["prompt_tokens"].get<int>() > 0);
  CHECK(object["timings"]["ttft_ms"].get<double>() > 0);
  CHECK(object["timings"]["cache_restore_bytes"].is_number_integer());
  CHECK(object["text"].get<std::string>() + "\n" == ask.out);

  // The installed models (GET /api/models): a header, a row per file of the models folder,
  // and the loaded synthetic model, which lies outside it, marked loaded.
  auto models = run_command(cli + "models");
  CHECK(models.exit_code == 0);
  CHECK(models.out.rfind("ID ", 0) == 0);
  const size_t row = models.out.find("\nsynthetic ");
  REQUIRE(row != std::string::npos);
  CHECK(models.out.substr(row, models.out.find('\n', row + 1) - row).find("gemma3") != std::string::npos);
  CHECK(models.out.substr(row, models.out.find('\n', row + 1) - row).find(" loaded") != std::string::npos);
  auto models_json = run_command(cli + "models --json");
  CHECK(models_json.exit_code == 0);
  const nlohmann::json listing = nlohmann::json::parse(models_json.out);
  int n_loaded = 0;
  for (const nlohmann::json& m : listing.at("models"))
    if (m.at("loaded") == true) {
      ++n_loaded;
      CHECK(m.at("id") == "synthetic");
      CHECK(m.at("available") == true);
    }
  CHECK(n_loaded == 1);

  auto status = run_command(cli + "status");
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("ready") != std::string::npos);
  CHECK(status.out.find("synthetic") != std::string::npos);
  CHECK(status.out.find(synthetic_daemon().socket_path()) != std::string::npos);
  // The KV's cost per token, from /api/cache.
  CHECK(status.out.find("kv:      f16, ") != std::string::npos);
  CHECK(status.out.find(" a token in memory, ") != std::string::npos);

  // chat without a terminal: lines from stdin, history re-sent each turn, commands.
  auto chat = run_command(cli + "chat --temp 0 --max-tokens 4", "hello\n/stats\n/reset\nagain\n/exit\nnever sent\n");
  CHECK(chat.exit_code == 0);
  CHECK(chat.err.find("ttft") != std::string::npos);
  CHECK(chat.out.find("(conversation forgotten)") != std::string::npos);
}

TEST_CASE("the loaded models, unload and load by name through the library and hearth ps, load, unload",
          "[client][e2e]") {
  Handle h;
  const auto loaded_ids = [&h] {
    char* text = nullptr;
    REQUIRE(hearth_client_loaded_models(h.client, &text) == HEARTH_OK);
    const nlohmann::json j = nlohmann::json::parse(text);
    hearth_free(text);
    std::vector<std::string> ids;
    for (const nlohmann::json& m : j.at("models")) ids.push_back(m.at("id").get<std::string>());
    return ids;
  };
  REQUIRE(loaded_ids() == std::vector<std::string>{"synthetic"});
  CHECK(hearth_client_load_model(h.client, "no-such-model", nullptr) == HEARTH_ERR_BAD_REQUEST);
  CHECK(hearth_client_http_status(h.client) == 404);
  CHECK(hearth_client_load_model(h.client, "", nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_load_model(h.client, "synthetic", "soon") == HEARTH_ERR_BAD_REQUEST);

  // Unloaded once idle; the next request loads it again.
  REQUIRE(hearth_client_unload_model(h.client, "synthetic") == HEARTH_OK);
  bool gone = false;
  for (int i = 0; i < 6000 && !gone; ++i) {
    gone = loaded_ids().empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
  hearth_request_options o = greedy(4);
  REQUIRE(hearth_client_complete(h.client, "Once upon a time", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  CHECK(loaded_ids() == std::vector<std::string>{"synthetic"});

  const std::string cli =
      shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(synthetic_daemon().socket_path()) + " ";
  auto ps = run_command(cli + "ps");
  CHECK(ps.exit_code == 0);
  CHECK(ps.out.rfind("ID ", 0) == 0);
  CHECK(ps.out.find("\nsynthetic ") != std::string::npos);
  CHECK(ps.out.find(" RAM  cpu ") != std::string::npos);  // its weights and KV are in RAM
  auto load = run_command(cli + "load synthetic --keep-alive 1h");
  CHECK(load.exit_code == 0);
  auto ps_json = run_command(cli + "ps --json");
  REQUIRE(ps_json.exit_code == 0);
  CHECK(nlohmann::json::parse(ps_json.out).at("models").at(0).at("expires_in_s").get<double>() > 3000);
  auto unknown = run_command(cli + "unload no-such-model");
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("no-such-model") != std::string::npos);
  CHECK(run_command(cli + "unload synthetic").exit_code == 0);
}
