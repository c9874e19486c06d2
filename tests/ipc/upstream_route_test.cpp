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
