// Routes of models served by an upstream (ipc/api/upstream_forward.h) over a real socket,
// with a scripted UpstreamForwarder in place of the daemon's HTTP client: what it answers is
// exactly what the test wrote, so the front's side is checked byte for byte.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;

// One upstream, "up", serving "m" as "up/m"; each forward() answers head_status and the
// pieces of body in order, or fails with failure when it is set.
class ScriptedUpstream final : public ipc::UpstreamForwarder {
 public:
  int head_status = 200;
  std::string head_type = "text/event-stream";
  std::vector<std::string> body;
  std::optional<ipc::ForwardFailure> failure;
  std::vector<ipc::ForwardCall> calls;  // what was sent

  std::optional<ipc::UpstreamModel> find(std::string_view model) const override {
    if (model != "up/m") return std::nullopt;
    return ipc::UpstreamModel{"up/m", "m", "up", "http://gpu-box:8000", ""};
  }
  std::vector<ipc::UpstreamModel> models() const override { return {*find("up/m")}; }
  std::vector<ipc::UpstreamState> states() const override { return {}; }
  std::string cache_salt(const std::string& scope_key) const override { return "salt-of-" + scope_key; }
  std::optional<ipc::ForwardFailure> forward(const ipc::ForwardCall& call,
                                             const std::function<bool(int, const std::string&)>& on_head,
                                             const std::function<bool(const char*, size_t)>& on_data,
                                             const std::atomic<bool>&, std::string*) override {
    calls.push_back(call);
    if (failure) return failure;
    if (!on_head(head_status, head_type)) return std::nullopt;
    for (const std::string& piece : body)
      if (!on_data(piece.data(), piece.size())) break;
    return std::nullopt;
  }
};

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string sse_chunk(const std::string& content, const char* finish = nullptr) {
  json c{{"id", "c"},
         {"model", "m"},
         {"choices", json::array({{{"index", 0}, {"delta", {{"content", content}}}, {"finish_reason", nullptr}}})}};
  if (finish) c["choices"][0]["finish_reason"] = finish;
  return "data: " + c.dump() + "\n\n";
}

}  // namespace

TEST_CASE("a streamed upstream answer that ends while a write waits for the client still ends", "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  // More than a Unix socket's buffer in one piece: the front's write of it waits for the
  // client, and the answer ends (its wake-up posted) meanwhile.
  std::string big;
  while (big.size() < (4u << 20)) big += sse_chunk(std::string(2000, 'x'));
  up->body = {big, sse_chunk("", "stop") + "data: [DONE]\n\n"};
  s.server().set_upstreams(up);
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.send(
      post("/v1/chat/completions", R"({"model":"up/m","messages":[{"role":"user","content":"hi"}],"stream":true})")));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the client reads late
  const std::optional<HttpReply> r = c.read_reply(60'000);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.size() > big.size());
  CHECK(r->body.substr(r->body.size() - 14) == "data: [DONE]\n\n");
}

namespace {

const char* kOllamaChat = R"({"model":"up/m","messages":[{"role":"user","content":"hi"}],"options":{"temperature":0}})";
const char* kAnthropic =
    R"({"model":"up/m","max_tokens":20,"messages":[{"role":"user","content":"hi"}],"stream":true})";

std::string usage_chunk() {
  return R"(data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,)"
         R"("prompt_tokens_details":{"cached_tokens":4}}})"
         "\n\n";
}

std::vector<json> lines(const std::string& body) {
  std::vector<json> out;
  for (size_t at = 0; at < body.size();) {
    const size_t nl = body.find('\n', at);
    out.push_back(json::parse(body.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

// Anthropic's stream as (event, data) pairs.
std::vector<std::pair<std::string, json>> anthropic_events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    const std::string ev = body.substr(at, end - at);
    const size_t nl = ev.find('\n');
    out.emplace_back(ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7)));
    at = end + 2;
  }
  return out;
}

HttpReply ask(TestServer& s, const std::string& path, const std::string& body) {
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.send(post(path, body)));
  std::optional<HttpReply> r = c.read_reply();
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("Ollama's chat for an upstream model: sent as OpenAI chat, answered as Ollama's NDJSON", "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  up->body = {sse_chunk("Hel"), sse_chunk("lo") + sse_chunk("", "stop"), usage_chunk() + "data: [DONE]\n\n"};
  s.server().set_upstreams(up);
  const HttpReply r = ask(s, "/api/chat", kOllamaChat);
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/x-ndjson");
  const std::vector<json> got = lines(r.body);
  REQUIRE(got.size() == 3);
  CHECK(got[0]["message"]["content"] == "Hel");
  CHECK(got[1]["message"]["content"] == "lo");
  CHECK(got[0]["model"] == "up/m");
  const json& last = got[2];
  CHECK(last["done"] == true);
  CHECK(last["done_reason"] == "stop");
  CHECK(last["prompt_eval_count"] == 9);
  CHECK(last["eval_count"] == 2);
  CHECK(last["timings"]["upstream"] == "up");
  CHECK(last["timings"]["cached_tokens"]["memory"] == 0);
  REQUIRE(up->calls.size() == 1);
  const json sent = json::parse(up->calls[0].body);
  CHECK(up->calls[0].path == "/v1/chat/completions");
  CHECK(sent["model"] == "m");
  CHECK(sent["messages"][0]["content"] == "hi");
  CHECK(sent["temperature"] == 0);
  CHECK_FALSE(sent.contains("top_k"));  // not given: the upstream's model's own default
  CHECK(sent["stream"] == true);
  CHECK(sent["stream_options"]["include_usage"] == true);
  CHECK(sent["stream_options"]["continuous_usage_stats"] == true);
  CHECK(sent["cache_salt"].get<std::string>().rfind("salt-of-", 0) == 0);
}

TEST_CASE("Ollama's generate for an upstream model, whole: one object with the answer", "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  up->head_type = "application/json";
  up->body = {R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"length"}],)",
              R"("usage":{"prompt_tokens":5,"completion_tokens":3}})"};
  s.server().set_upstreams(up);
  const HttpReply r = ask(s, "/api/generate", R"({"model":"up/m","prompt":"Say hi","stream":false})");
  REQUIRE(r.status == 200);
  const json j = json::parse(r.body);
  CHECK(j["response"] == "Hello");
  CHECK(j["done"] == true);
  CHECK(j["done_reason"] == "length");
  CHECK(j["eval_count"] == 3);
  CHECK(j["timings"]["upstream"] == "up");
  CHECK(json::parse(up->calls.at(0).body)["stream"] == false);
}

TEST_CASE("Ollama's logprobs for an upstream model: asked as OpenAI's, answered in Ollama's shape", "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  const std::string piece =
      R"(data: {"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.25,)"
      R"("bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.25,"bytes":[72,105]},)"
      R"({"token":"Yo","logprob":-1.5,"bytes":[89,111]}]}]},"finish_reason":"length"}]})"
      "\n\n";
  up->body = {piece + usage_chunk() + "data: [DONE]\n\n"};
  s.server().set_upstreams(up);
  const HttpReply r = ask(
      s, "/api/chat",
      R"({"model":"up/m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2,"stream":true})");
  REQUIRE(r.status == 200);
  const std::vector<json> got = lines(r.body);
  REQUIRE(got.size() == 2);
  const json want = json::parse(R"([{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[
      {"token":"Hi","logprob":-0.25,"bytes":[72,105]},{"token":"Yo","logprob":-1.5,"bytes":[89,111]}]}])");
  CHECK(got[0]["logprobs"] == want);
  const json sent = json::parse(up->calls.at(0).body);
  CHECK(sent["logprobs"] == true);
  CHECK(sent["top_logprobs"] == 2);
}

TEST_CASE("Anthropic's messages for an upstream model: its event sequence, a call as a tool_use block",
          "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  const std::string call_start =
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",)"
      R"("function":{"name":"get","arguments":"{\"city\":"}}]},"finish_reason":null}]})"
      "\n\n";
  const std::string call_rest =
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]},)"
      R"("finish_reason":"tool_calls"}]})"
      "\n\n";
  up->body = {sse_chunk("Let me look."), call_start, call_rest, usage_chunk() + "data: [DONE]\n\n"};
  s.server().set_upstreams(up);
  const HttpReply r = ask(s, "/v1/messages", kAnthropic);
  REQUIRE(r.status == 200);
  const auto events = anthropic_events(r.body);
  std::vector<std::string> names;
  for (const auto& [name, data] : events) names.push_back(name);
  CHECK(names == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                          "content_block_stop", "content_block_start", "content_block_delta",
                                          "content_block_delta", "content_block_stop", "message_delta",
                                          "message_stop"});
  CHECK(events[5].second["content_block"]["type"] == "tool_use");
  CHECK(events[5].second["content_block"]["name"] == "get");
  CHECK(events[7].second["delta"]["partial_json"] == "\"Oslo\"}");
  const json& delta = events[9].second;
  CHECK(delta["delta"]["stop_reason"] == "tool_use");
  CHECK(delta["usage"]["input_tokens"] == 5);  // 9 prompt tokens, 4 of them cached upstream
  CHECK(delta["usage"]["cache_read_input_tokens"] == 4);
  CHECK(delta["timings"]["upstream"] == "up");
  const json sent = json::parse(up->calls.at(0).body);
  CHECK(sent["max_tokens"] == 20);
  CHECK(sent["chat_template_kwargs"]["enable_thinking"] == false);
}

TEST_CASE("upstream faults in each surface's own shape: no answer, a refusal, a stream broken off", "[ipc][upstream]") {
  TestServer s;
  auto up = std::make_shared<ScriptedUpstream>();
  s.server().set_upstreams(up);
  up->failure = ipc::ForwardFailure{504, "upstream 'up' did not answer in time"};
  HttpReply r = ask(s, "/v1/messages", kAnthropic);
  CHECK(r.status == 504);
  CHECK(json::parse(r.body)["type"] == "error");
  CHECK(json::parse(r.body)["error"]["message"] == "upstream 'up' did not answer in time");
  r = ask(s, "/api/chat", kOllamaChat);
  CHECK(r.status == 504);
  CHECK(json::parse(r.body)["error"] == "upstream 'up' did not answer in time");

  up->failure.reset();
  up->head_status = 400;
  up->head_type = "application/json";
  up->body = {R"({"error":{"message":"max_tokens is too large","type":"BadRequestError"}})"};
  r = ask(s, "/api/chat", kOllamaChat);
  CHECK(r.status == 400);
  CHECK_THAT(json::parse(r.body)["error"].get<std::string>(), Catch::Contains("max_tokens is too large"));

  up->head_status = 200;
  up->head_type = "text/event-stream";
  up->body = {sse_chunk("Hel")};  // and then the connection is gone: no finish, no [DONE]
  const std::vector<json> got = lines(ask(s, "/api/chat", kOllamaChat).body);
  REQUIRE(got.size() == 2);
  CHECK(got[0]["message"]["content"] == "Hel");
  CHECK_THAT(got[1]["error"].get<std::string>(), Catch::Contains("broke off"));
  const auto events = anthropic_events(ask(s, "/v1/messages", kAnthropic).body);
  CHECK(events.back().first == "error");
  CHECK_THAT(events.back().second["error"]["message"].get<std::string>(), Catch::Contains("broke off"));
  for (const auto& [name, data] : events) CHECK(name != "message_stop");
}
