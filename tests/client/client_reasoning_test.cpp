// A thinking model's reasoning through libhearth-client 0.5: delta.reasoning_content reaches
// options.on_reasoning, a callback of its own, never on_text or out_text; a whole answer's
// message.reasoning_content comes once; thinking and thinking_budget_tokens go out as the
// daemon reads them. Against the fake daemon of the other protocol tests.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_daemon.h"
#include "hearth/client.h"

using namespace hearth::test;
using Json = nlohmann::json;

namespace {

struct Handle {
  explicit Handle(const FakeDaemon& daemon) {
    REQUIRE(hearth_client_open(daemon.path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

// Both kinds, in the order they came: "R:" reasoning, "T:" text.
struct Heard {
  std::vector<std::string> order;
  int stop_after_reasoning = -1;  // >= 0: the reasoning callback aborts at that many pieces
};
int on_text(const char* piece, size_t len, void* user_data) {
  static_cast<Heard*>(user_data)->order.push_back("T:" + std::string(piece, len));
  return 0;
}
int on_reasoning(const char* piece, size_t len, void* user_data) {
  auto* h = static_cast<Heard*>(user_data);
  h->order.push_back("R:" + std::string(piece, len));
  return h->stop_after_reasoning >= 0 && static_cast<int>(h->order.size()) >= h->stop_after_reasoning;
}

std::string chunk(const std::string& delta_json, const std::string& finish = "null") {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":)" +
         delta_json + R"(,"finish_reason":)" + finish + "}]}";
}

void stream_thinking(const FakeDaemon::Request&, int fd) {
  write_all(fd, sse_head() + sse_event(chunk(R"({"role":"assistant","content":""})")) +
                    sse_event(chunk(R"({"reasoning_content":"The user "})")) +
                    sse_event(chunk(R"({"reasoning_content":"greets."})")) + sse_event(chunk(R"({"content":"Hi"})")) +
                    sse_event(chunk(R"({"content":"!"})", R"("stop")")) + http_chunk("data: [DONE]\n\n") +
                    last_chunk());
}

void whole_thinking(const FakeDaemon::Request&, int fd) {
  write_all(fd, http_response(200, "application/json",
                              R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hi!",)"
                              R"("reasoning_content":"The user greets."},"finish_reason":"stop"}]})"));
}

}  // namespace

TEST_CASE("streamed reasoning reaches on_reasoning piece by piece, apart from the answer's text", "[client]") {
  FakeDaemon daemon(stream_thinking);
  Handle h(daemon);
  hearth_message messages[] = {{"user", "Hello"}};
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.on_reasoning = on_reasoning;
  Heard heard;
  char* text = nullptr;
  REQUIRE(hearth_client_chat(h.client, messages, 1, &o, on_text, &heard, &text, nullptr) == HEARTH_OK);
  CHECK(heard.order == std::vector<std::string>{"R:The user ", "R:greets.", "T:Hi", "T:!"});
  REQUIRE(text != nullptr);
  CHECK(std::string(text) == "Hi!");  // the reasoning is never the answer
  hearth_free(text);
  // Without on_reasoning (an 0.4 program) the reasoning is dropped, as before.
  Heard plain;
  REQUIRE(hearth_client_chat(h.client, messages, 1, nullptr, on_text, &plain, nullptr, nullptr) == HEARTH_OK);
  CHECK(plain.order == std::vector<std::string>{"T:Hi", "T:!"});
}

TEST_CASE("a non-zero return from on_reasoning cancels the request", "[client]") {
  FakeDaemon daemon(stream_thinking);
  Handle h(daemon);
  hearth_message messages[] = {{"user", "Hello"}};
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.on_reasoning = on_reasoning;
  Heard heard;
  heard.stop_after_reasoning = 1;
  CHECK(hearth_client_chat(h.client, messages, 1, &o, on_text, &heard, nullptr, nullptr) == HEARTH_ERR_CANCELLED);
  CHECK(heard.order == std::vector<std::string>{"R:The user "});
}

TEST_CASE("a whole answer's reasoning comes once to on_reasoning, before the call returns", "[client]") {
  FakeDaemon daemon(whole_thinking);
  Handle h(daemon);
  hearth_message messages[] = {{"user", "Hello"}};
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.on_reasoning = on_reasoning;
  Heard heard;
  char* text = nullptr;
  REQUIRE(hearth_client_chat(h.client, messages, 1, &o, nullptr, &heard, &text, nullptr) == HEARTH_OK);
  CHECK(heard.order == std::vector<std::string>{"R:The user greets."});
  REQUIRE(text != nullptr);
  CHECK(std::string(text) == "Hi!");
  hearth_free(text);
}

TEST_CASE("thinking and its budget are sent as the daemon reads them, and only when set", "[client]") {
  FakeDaemon daemon(whole_thinking);
  Handle h(daemon);
  hearth_message messages[] = {{"user", "Hello"}};
  hearth_request_options o;
  hearth_request_options_init(&o);
  REQUIRE(hearth_client_chat(h.client, messages, 1, &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  o.thinking = HEARTH_THINKING_OFF;
  REQUIRE(hearth_client_chat(h.client, messages, 1, &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  o.thinking = HEARTH_THINKING_ON;
  o.thinking_budget_tokens = 256;
  REQUIRE(hearth_client_chat(h.client, messages, 1, &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_OK);
  auto requests = daemon.requests();
  REQUIRE(requests.size() == 3);
  const Json plain = Json::parse(requests[0].body);
  CHECK_FALSE(plain.contains("reasoning_effort"));
  CHECK_FALSE(plain.contains("chat_template_kwargs"));
  CHECK_FALSE(plain.contains("thinking_budget_tokens"));
  CHECK(Json::parse(requests[1].body)["reasoning_effort"] == "none");
  const Json on = Json::parse(requests[2].body);
  CHECK(on["chat_template_kwargs"] == Json{{"enable_thinking", true}});
  CHECK(on["thinking_budget_tokens"] == 256);

  // Refused before anything is sent: an unknown value, a negative budget, a completion.
  o.thinking = 7;
  CHECK(hearth_client_chat(h.client, messages, 1, &o, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  o.thinking = HEARTH_THINKING_ON;
  o.thinking_budget_tokens = -1;
  CHECK(hearth_client_chat(h.client, messages, 1, &o, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  o.thinking_budget_tokens = 0;
  CHECK(hearth_client_complete(h.client, "x", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(daemon.requests().size() == 3);
}

TEST_CASE("the 0.5 members default to not sent, and the version says 0.5", "[client]") {
  hearth_request_options o;
  hearth_request_options_init(&o);
  CHECK(o.on_reasoning == nullptr);
  CHECK(o.thinking == HEARTH_THINKING_DEFAULT);
  CHECK(o.thinking_budget_tokens == 0);
  CHECK(HEARTH_CLIENT_VERSION_NUMBER >= 0x000500);
  CHECK(std::string(hearth_client_version()) == HEARTH_CLIENT_VERSION);
}
