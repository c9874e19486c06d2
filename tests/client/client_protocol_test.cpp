// libhearth-client against a scripted fake daemon (fake_daemon.h): what goes on the wire,
// how streams, responses and errors come back through the C API, and cancellation.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "hearth/client.h"

namespace {

using hearth::test::eventually;
using hearth::test::FakeDaemon;
using hearth::test::http_chunk;
using hearth::test::http_response;
using hearth::test::last_chunk;
using hearth::test::sse_event;
using hearth::test::sse_head;
using hearth::test::wait_for_close;
using hearth::test::wait_until_asleep;
using hearth::test::write_all;
using Json = nlohmann::json;

// A handle on the fake daemon's socket, closed at the end of the scope.
struct Handle {
  explicit Handle(const FakeDaemon& daemon) {
    REQUIRE(hearth_client_open(daemon.path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

struct Collected {
  std::vector<std::string> pieces;
};
int collect(const char* piece, size_t len, void* user_data) {
  static_cast<Collected*>(user_data)->pieces.emplace_back(piece, len);
  return 0;
}

const char* kTimings =
    R"({"ttft_ms":12.5,"prefill_ms":10.0,"decode_ms":30.0,"prefill_tok_s":500.0,"decode_tok_s":66.7,)"
    R"("itl_ms":{"mean":15.0,"p50":14.0,"p95":20.0},"queue_ms":0.5})";

std::string chat_chunk(const std::string& delta_json, const std::string& finish = "null") {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
         delta_json + R"(,"finish_reason":)" + finish + "}]}";
}

// A streamed chat answer "Hello, world" in three pieces, then usage and [DONE].
void stream_hello(const FakeDaemon::Request&, int fd) {
  std::string finish = R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,)"
                       R"("delta":{},"finish_reason":"stop"}],"timings":)" +
                       std::string(kTimings) + "}";
  std::string usage = R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],)"
                      R"("usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,)"
                      R"("prompt_tokens_details":{"cached_tokens":4}},"timings":)" +
                      std::string(kTimings) + "}";
  write_all(fd, sse_head() + sse_event(chat_chunk(R"({"role":"assistant","content":""})")) +
                    sse_event(chat_chunk(R"({"content":"Hello"})")));
  write_all(fd, sse_event(chat_chunk(R"({"content":", "})")) + sse_event(chat_chunk(R"({"content":"world"})")) +
                    sse_event(finish) + sse_event(usage) + http_chunk("data: [DONE]\n\n") + last_chunk());
}

}  // namespace

TEST_CASE("a streamed chat delivers every piece to the callback as it arrives and fills the stats", "[client]") {
  FakeDaemon daemon(stream_hello);
  Handle h(daemon);
  hearth_message messages[] = {{"system", "Be brief."}, {"user", "Say hello"}};
  Collected got;
  char* text = nullptr;
  hearth_stats stats;
  hearth_stats_init(&stats);
  REQUIRE(hearth_client_chat(h.client, messages, 2, nullptr, collect, &got, &text, &stats) == HEARTH_OK);
  CHECK(got.pieces == std::vector<std::string>{"Hello", ", ", "world"});
  REQUIRE(text != nullptr);
  CHECK(std::string(text) == "Hello, world");
  hearth_free(text);
  CHECK(stats.prompt_tokens == 9);
  CHECK(stats.completion_tokens == 3);
  CHECK(stats.cached_tokens == 4);
  CHECK(stats.ttft_ms == 12.5);
  CHECK(stats.prefill_ms == 10.0);
  CHECK(stats.decode_ms == 30.0);
  CHECK(stats.prefill_tok_s == 500.0);
  CHECK(stats.decode_tok_s == 66.7);
  CHECK(stats.itl_mean_ms == 15.0);
  CHECK(stats.itl_p50_ms == 14.0);
  CHECK(stats.itl_p95_ms == 20.0);
  CHECK(stats.queue_ms == 0.5);
  CHECK(stats.total_ms > 0);
  CHECK(stats.finish_reason == HEARTH_FINISH_STOP);
  CHECK(std::string(stats.finish_reason_text) == "stop");
  CHECK(hearth_client_http_status(h.client) == 200);
  CHECK(std::string(hearth_client_last_error(h.client)).empty());

  auto requests = daemon.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].head.rfind("POST /v1/chat/completions HTTP/1.1", 0) == 0);
  Json body = Json::parse(requests[0].body);
  CHECK(body["stream"] == true);
  CHECK(body["stream_options"]["include_usage"] == true);
  CHECK(body["messages"] ==
        Json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}])"));
}

TEST_CASE("a non-streamed completion returns the whole text through out_text", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    std::string body = R"({"id":"c2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,)"
                       R"("text":"four","finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":1,)"
                       R"("total_tokens":6},"timings":)" +
                       std::string(kTimings) + "}";
    write_all(fd, http_response(200, "application/json", body));
  });
  Handle h(daemon);
  char* text = nullptr;
  hearth_stats stats;
  hearth_stats_init(&stats);
  REQUIRE(hearth_client_complete(h.client, "2+2=", nullptr, nullptr, nullptr, &text, &stats) == HEARTH_OK);
  REQUIRE(text != nullptr);
  CHECK(std::string(text) == "four");
  hearth_free(text);
  CHECK(stats.prompt_tokens == 5);
  CHECK(stats.finish_reason == HEARTH_FINISH_LENGTH);
  CHECK(stats.ttft_ms == 12.5);
  auto requests = daemon.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].head.rfind("POST /v1/completions HTTP/1.1", 0) == 0);
  Json body = Json::parse(requests[0].body);
  CHECK(body["prompt"] == "2+2=");
  CHECK(body["stream"] == false);
  CHECK_FALSE(body.contains("stream_options"));
}

TEST_CASE("request options are sent only when set, with the values the caller wrote", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    write_all(fd,
              http_response(200, "application/json", R"({"choices":[{"index":0,"text":"","finish_reason":"stop"}]})"));
  });
  Handle h(daemon);
  hearth_request_options o;
  hearth_request_options_init(&o);
  REQUIRE(hearth_client_complete(h.client, "a", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  const char* stops[] = {"\n\n", "END"};
  o.model = "tiny";
  o.max_tokens = 24;
  o.temperature = 0.7f;
  o.top_p = 0.9f;
  o.top_k = 40;
  o.min_p = 0.05f;
  o.has_seed = 1;
  o.seed = 42;
  o.stop = stops;
  o.n_stop = 2;
  o.presence_penalty = 0.5f;
  o.frequency_penalty = -0.25f;
  o.repetition_penalty = 1.1f;
  REQUIRE(hearth_client_complete(h.client, "a", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);

  auto requests = daemon.requests();
  REQUIRE(requests.size() == 2);
  Json plain = Json::parse(requests[0].body);
  CHECK(plain == Json::parse(R"({"prompt":"a","stream":false})"));
  Json full = Json::parse(requests[1].body);
  CHECK(full == Json::parse(R"({"prompt":"a","stream":false,"model":"tiny","max_tokens":24,"temperature":0.7,
      "top_p":0.9,"top_k":40,"min_p":0.05,"seed":42,"stop":["\n\n","END"],"presence_penalty":0.5,
      "frequency_penalty":-0.25,"repetition_penalty":1.1})"));
}

TEST_CASE("HTTP error statuses map to status codes and carry the daemon's message", "[client]") {
  struct Case {
    int status;
    int code;
  };
  for (Case c : {Case{429, HEARTH_ERR_BUSY}, Case{503, HEARTH_ERR_UNAVAILABLE}, Case{400, HEARTH_ERR_BAD_REQUEST},
                 Case{404, HEARTH_ERR_BAD_REQUEST}, Case{413, HEARTH_ERR_BAD_REQUEST}, Case{500, HEARTH_ERR_SERVER},
                 Case{418, HEARTH_ERR_HTTP}}) {
    FakeDaemon daemon([c](const FakeDaemon::Request&, int fd) {
      std::string body = R"({"error":{"message":"reason )" + std::to_string(c.status) +
                         R"(","type":"invalid_request_error","param":null,"code":null}})";
      write_all(fd, http_response(c.status, "application/json", body));
    });
    Handle h(daemon);
    hearth_message m{"user", "hi"};
    Collected got;
    INFO("status " << c.status);
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, nullptr) == c.code);
    CHECK(hearth_client_http_status(h.client) == c.status);
    CHECK(std::string(hearth_client_last_error(h.client)).find("reason " + std::to_string(c.status)) !=
          std::string::npos);
    CHECK(got.pieces.empty());
  }
}

TEST_CASE("an error object inside a stream is HEARTH_ERR_SERVER with its message", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    write_all(fd, sse_head() + sse_event(chat_chunk(R"({"content":"par"})")) +
                      sse_event(R"({"error":{"message":"engine failed","type":"server_error"}})") +
                      http_chunk("data: [DONE]\n\n") + last_chunk());
  });
  Handle h(daemon);
  hearth_message m{"user", "hi"};
  Collected got;
  CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, nullptr) == HEARTH_ERR_SERVER);
  CHECK(std::string(hearth_client_last_error(h.client)) == "engine failed");
  CHECK(got.pieces == std::vector<std::string>{"par"});
}

TEST_CASE("a stream that ends without [DONE], or bytes that are not HTTP, are protocol errors", "[client]") {
  {
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
      write_all(fd, sse_head() + sse_event(chat_chunk(R"({"content":"x"})")) + last_chunk());
    });
    Handle h(daemon);
    hearth_message m{"user", "hi"};
    Collected got;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, nullptr) == HEARTH_ERR_PROTOCOL);
  }
  {
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) { write_all(fd, "SSH-2.0-OpenSSH\r\n\r\n"); });
    Handle h(daemon);
    CHECK(hearth_client_health(h.client) == HEARTH_ERR_PROTOCOL);
  }
  {
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) { write_all(fd, sse_head() + sse_event("{not json")); });
    Handle h(daemon);
    hearth_message m{"user", "hi"};
    Collected got;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, nullptr) == HEARTH_ERR_PROTOCOL);
  }
  {
    // The daemon dies mid-stream: the chunked body is cut short.
    FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
      write_all(fd, sse_head() + sse_event(chat_chunk(R"({"content":"x"})")));
    });
    Handle h(daemon);
    hearth_message m{"user", "hi"};
    Collected got;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, nullptr) == HEARTH_ERR_IO);
    CHECK(got.pieces == std::vector<std::string>{"x"});
  }
}

TEST_CASE("a daemon answering a stream request with plain JSON still delivers the text", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    write_all(fd, http_response(200, "application/json",
                                R"({"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},)"
                                R"("finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})"));
  });
  Handle h(daemon);
  hearth_message m{"user", "hi"};
  Collected got;
  hearth_stats stats;
  hearth_stats_init(&stats);
  CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, &stats) == HEARTH_OK);
  CHECK(got.pieces == std::vector<std::string>{"whole"});
  CHECK(stats.prompt_tokens == 3);
}

TEST_CASE("a non-zero return from the callback aborts with HEARTH_ERR_CANCELLED and disconnects", "[client]") {
  std::atomic<bool> saw_disconnect{false};
  FakeDaemon daemon([&](const FakeDaemon::Request& r, int fd) {
    if (r.head.rfind("GET /health", 0) == 0) {  // the probe below
      write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
      return;
    }
    write_all(fd, sse_head() + sse_event(chat_chunk(R"({"content":"one"})")));
    saw_disconnect = wait_for_close(fd);
  });
  {
    Handle h(daemon);
    hearth_message m{"user", "hi"};
    auto stop_at_once = [](const char*, size_t, void*) -> int { return 1; };
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, stop_at_once, nullptr, nullptr, nullptr) ==
          HEARTH_ERR_CANCELLED);
  }
  // The fake serves one connection at a time: a second request proves the first ended.
  hearth_client* probe = nullptr;
  REQUIRE(hearth_client_open(daemon.path().c_str(), &probe) == HEARTH_OK);
  CHECK(hearth_client_health(probe) == HEARTH_OK);
  hearth_client_close(probe);
  CHECK(saw_disconnect);
}

TEST_CASE("hearth_client_cancel from another thread ends a running stream promptly", "[client]") {
  // The fake's stream stalls after its first piece and never ends on its own: the chat call
  // can only return because the cancel ended it, and saw_disconnect says the client closed
  // the connection (false only if the fake gave up waiting, after the hang guard).
  std::atomic<bool> saw_disconnect{false};
  FakeDaemon daemon([&](const FakeDaemon::Request& r, int fd) {
    if (r.head.rfind("GET /health", 0) == 0) {  // the probe below
      write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
      return;
    }
    write_all(fd, sse_head() + sse_event(chat_chunk(R"({"content":"first"})")));
    saw_disconnect = wait_for_close(fd);  // then the stream stalls and never ends on its own
  });
  Handle h(daemon);
  std::atomic<bool> first_piece{false};
  auto on_piece = [](const char*, size_t, void* user_data) -> int {
    static_cast<std::atomic<bool>*>(user_data)->store(true);
    return 0;
  };
  const pid_t requesting_thread = ::gettid();
  std::atomic<bool> asleep{false};
  std::thread canceller([&] {
    eventually([&] { return first_piece.load(); });
    asleep = wait_until_asleep(requesting_thread);  // blocked reading the stalled stream
    hearth_client_cancel(h.client);
  });
  hearth_message m{"user", "hi"};
  int rc = hearth_client_chat(h.client, &m, 1, nullptr, on_piece, &first_piece, nullptr, nullptr);
  canceller.join();
  CHECK(first_piece);
  CHECK(asleep);
  CHECK(rc == HEARTH_ERR_CANCELLED);

  // The handle is usable again afterwards (the cancel does not stick).
  hearth_client* probe = nullptr;
  REQUIRE(hearth_client_open(daemon.path().c_str(), &probe) == HEARTH_OK);
  CHECK(hearth_client_health(probe) == HEARTH_OK);  // served after the first connection ended
  hearth_client_close(probe);
  INFO("saw_disconnect false: the client did not close the stalled stream before the hang guard");
  CHECK(saw_disconnect);
  CHECK(hearth_client_health(h.client) == HEARTH_OK);
}

TEST_CASE("hearth_client_cancel also ends a request still waiting for the response headers", "[client]") {
  // The fake reads the request and never answers: only the cancel can end the call.
  std::atomic<bool> saw_disconnect{false};
  FakeDaemon daemon([&](const FakeDaemon::Request& r, int fd) {
    if (r.head.rfind("GET /health", 0) == 0) {  // the probe below
      write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
      return;
    }
    saw_disconnect = wait_for_close(fd);
  });
  Handle h(daemon);
  const pid_t requesting_thread = ::gettid();
  std::atomic<bool> asleep{false};
  std::thread canceller([&] {
    eventually([&] { return !daemon.requests().empty(); });  // the request was sent
    asleep = wait_until_asleep(requesting_thread);           // and the client waits for the head
    hearth_client_cancel(h.client);
  });
  hearth_message m{"user", "hi"};
  char* text = nullptr;
  CHECK(hearth_client_chat(h.client, &m, 1, nullptr, nullptr, nullptr, &text, nullptr) == HEARTH_ERR_CANCELLED);
  CHECK(text == nullptr);
  canceller.join();
  CHECK(asleep);
  // The fake serves one connection at a time: this answer means the first one ended.
  hearth_client* probe = nullptr;
  REQUIRE(hearth_client_open(daemon.path().c_str(), &probe) == HEARTH_OK);
  CHECK(hearth_client_health(probe) == HEARTH_OK);
  hearth_client_close(probe);
  INFO("saw_disconnect false: the client did not close the unanswered request before the hang guard");
  CHECK(saw_disconnect);
}

TEST_CASE("list_models returns every model in one block freed by hearth_free", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request& r, int fd) {
    if (r.head.rfind("GET /v1/models ", 0) != 0) {
      write_all(fd, http_response(404, "application/json", R"({"error":{"message":"no route"}})"));
      return;
    }
    write_all(fd, http_response(200, "application/json",
                                R"({"object":"list","data":[{"id":"gemma-3-270m-q4_k_m","object":"model",)"
                                R"("created":1700000000,"owned_by":"hearth"},{"id":"other","object":"model"}]})"));
  });
  Handle h(daemon);
  hearth_model_info* models = nullptr;
  size_t n = 0;
  REQUIRE(hearth_client_list_models(h.client, &models, &n) == HEARTH_OK);
  REQUIRE(n == 2);
  CHECK(std::string(models[0].id) == "gemma-3-270m-q4_k_m");
  CHECK(std::string(models[0].owned_by) == "hearth");
  CHECK(models[0].created == 1700000000);
  CHECK(std::string(models[1].id) == "other");
  CHECK(std::string(models[1].owned_by).empty());
  CHECK(models[1].created == 0);
  hearth_free(models);
}

TEST_CASE("health is HEARTH_OK on 200 and HEARTH_ERR_UNAVAILABLE while the daemon loads", "[client]") {
  std::atomic<bool> loading{true};
  FakeDaemon daemon([&](const FakeDaemon::Request&, int fd) {
    if (loading) {
      write_all(fd, http_response(503, "application/json",
                                  R"({"error":{"message":"loading the model","type":"unavailable","code":503}})"));
    } else {
      write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
    }
  });
  Handle h(daemon);
  CHECK(hearth_client_health(h.client) == HEARTH_ERR_UNAVAILABLE);
  CHECK(std::string(hearth_client_last_error(h.client)).find("loading the model") != std::string::npos);
  loading = false;
  CHECK(hearth_client_health(h.client) == HEARTH_OK);
  CHECK(std::string(hearth_client_last_error(h.client)).empty());
  for (const auto& r : daemon.requests()) CHECK(r.head.rfind("GET /health HTTP/1.1", 0) == 0);
}

TEST_CASE("a stats struct from an older, smaller header is filled only up to its struct_size", "[client]") {
  FakeDaemon daemon(stream_hello);
  Handle h(daemon);
  // An "old" caller knows only the members up to completion_tokens; the rest is its own memory.
  struct {
    hearth_stats stats;
  } buffer;
  std::memset(&buffer, 0xAB, sizeof(buffer));
  buffer.stats.struct_size = offsetof(hearth_stats, cached_tokens);
  hearth_message m{"user", "hi"};
  Collected got;
  REQUIRE(hearth_client_chat(h.client, &m, 1, nullptr, collect, &got, nullptr, &buffer.stats) == HEARTH_OK);
  CHECK(buffer.stats.struct_size == offsetof(hearth_stats, cached_tokens));
  CHECK(buffer.stats.prompt_tokens == 9);
  CHECK(buffer.stats.completion_tokens == 3);
  int64_t untouched;
  std::memset(&untouched, 0xAB, sizeof(untouched));
  CHECK(buffer.stats.cached_tokens == untouched);
}
