// Hundreds of malformed requests over the real socket: each gets the right status and the
// error object of its route's API, OpenAI's, Anthropic's or Ollama's (or, for headers that
// never complete, a closed connection), the counts show up in /metrics, and a valid request
// still succeeds afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "malformed_cases.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;

// Sends c on a new connection and checks the answer; returns the status seen.
int check_case(const std::string& socket_path, const MalformedCase& c) {
  INFO("case: " << c.name);
  HttpConn conn = HttpConn::unix_socket(socket_path);
  REQUIRE(conn.connected());
  conn.send(c.raw);  // the server may close before it has read everything (413)
  std::optional<HttpReply> r = conn.read_reply();
  REQUIRE(r);
  INFO("body: " << r->body);
  REQUIRE(r->status == c.status);
  REQUIRE(r->header("content-type") == "application/json");
  const json j = json::parse(r->body);
  if (c.status == 405) REQUIRE(!r->header("allow").empty());
  if (c.anthropic) {
    // Anthropic's {"type": "error", "error": {"type", "message"}}; its message names the field.
    REQUIRE(j.size() == 2);
    REQUIRE(j.at("type") == "error");
    REQUIRE(j.at("error").size() == 2);
    REQUIRE(j["error"].at("type").is_string());
    const std::string message = j["error"].at("message");
    REQUIRE(!message.empty());
    if (!c.param.empty()) REQUIRE(message.find(c.param) != std::string::npos);
    return r->status;
  }
  if (c.ollama) {
    REQUIRE(j.size() == 1);  // Ollama's {"error": "<message>"}, nothing else
    REQUIRE(j.at("error").is_string());
    REQUIRE(!j["error"].get<std::string>().empty());
    return r->status;
  }
  REQUIRE(j.at("error").at("message").is_string());
  REQUIRE(!j["error"]["message"].get<std::string>().empty());
  REQUIRE(j["error"].at("type").is_string());
  REQUIRE((j["error"].at("param").is_null() || j["error"]["param"].is_string()));
  REQUIRE((j["error"].at("code").is_null() || j["error"]["code"].is_string()));
  if (!c.param.empty()) {
    REQUIRE(j["error"]["param"].is_string());
    REQUIRE(j["error"]["param"].get<std::string>().rfind(c.param, 0) == 0);
  }
  return r->status;
}

uint64_t metric(const std::string& socket_path, const std::string& name) {
  auto r = http_call(socket_path, "GET", "/metrics");
  REQUIRE(r);
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return 0;
  return std::stoull(r->body.substr(at + name.size() + 2));
}

}  // namespace

TEST_CASE("Hundreds of malformed requests each get the right status and an error object, and serving goes on") {
  TestServer s;
  std::vector<MalformedCase> cases = json_level_cases();
  for (MalformedCase& c : body_syntax_cases()) cases.push_back(std::move(c));
  for (MalformedCase& c : http_level_cases(TestServerOptions().server.body_limit_bytes)) cases.push_back(std::move(c));
  for (MalformedCase& c : ollama_cases()) cases.push_back(std::move(c));
  std::map<int, uint64_t> sent;
  for (const MalformedCase& c : cases) ++sent[check_case(s.socket_path(), c)];

  // DNS-rebinding defence on a loopback TCP listener.
  uint16_t port = 0;
  REQUIRE(s.server().adopt_tcp_fd(loopback_listener(&port), false).ok());
  int n_host_cases = 0;
  for (const char* host : {"evil.com", "evil.com:8080", "127.0.0.1.evil.com", "localhost.evil.com", "10.0.0.1", "[::2]",
                           "", "localhost:abc", "128.0.0.1", "0x7f.0.0.1", "[::1", "192.168.1.1:80"}) {
    INFO("host: " << host);
    HttpConn c = HttpConn::tcp(port);
    REQUIRE(c.send(http_request("GET", "/health", "", "", host)));
    auto r = c.read_reply();
    REQUIRE(r);
    REQUIRE(r->status == 403);
    REQUIRE(json::parse(r->body)["error"]["type"] == "permission_error");
    ++sent[403];
    ++n_host_cases;
  }
  {
    HttpConn c = HttpConn::tcp(port);
    REQUIRE(c.send("GET /health HTTP/1.1\r\n\r\n"));  // no Host at all
    REQUIRE(c.read_reply()->status == 403);
    ++sent[403];
    ++n_host_cases;
  }
  for (const char* host :
       {"localhost", "localhost:8080", "127.0.0.1", "127.1.2.3:99", "[::1]", "[::1]:8080", "LOCALHOST"}) {
    INFO("host: " << host);
    HttpConn c = HttpConn::tcp(port);
    REQUIRE(c.send(http_request("GET", "/health", "", "", host)));
    REQUIRE(c.read_reply()->status == 200);
    ++sent[200];
  }

  // Headers (or bodies) that never complete: the connection is closed, without an answer.
  const std::vector<std::string> stuck = {
      "",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"prompt\":",
      "GET /hea",
  };
  // Only the header or body timeout (400 ms here) can close them: the connections are new,
  // so idle_timeout does not apply, and the hang guard of wait_closed() is minutes.
  TestServerOptions short_timeouts;
  short_timeouts.server.header_timeout = std::chrono::milliseconds(400);
  short_timeouts.server.body_timeout = std::chrono::milliseconds(400);
  TestServer timing_out(short_timeouts);
  for (const std::string& partial : stuck) {
    INFO("partial: " << partial);
    HttpConn c = HttpConn::unix_socket(timing_out.socket_path());
    REQUIRE(c.send(partial));
    REQUIRE(c.wait_closed());
  }

  const size_t total = cases.size() + n_host_cases + stuck.size();
  INFO("malformed requests: " << total);
  REQUIRE(total >= 200);

  // Every answer was counted by status.
  for (const auto& [status, n] : sent) {
    INFO("status " << status);
    REQUIRE(metric(s.socket_path(), "hearth_requests_total{status=\"" + std::to_string(status) + "\"}") >= n);
  }
  REQUIRE(metric(s.socket_path(), "hearth_requests_total{status=\"400\"}") == sent[400]);

  // And the server still serves.
  auto ok = http_call(s.socket_path(), "POST", kChatPath, chat_base().dump());
  REQUIRE(ok);
  REQUIRE(ok->status == 200);
  REQUIRE(json::parse(ok->body)["object"] == "chat.completion");
  auto message = http_call(s.socket_path(), "POST", kMessagesPath, messages_base().dump());
  REQUIRE(message);
  REQUIRE(message->status == 200);
  REQUIRE(json::parse(message->body)["type"] == "message");
  auto ollama =
      http_call(s.socket_path(), "POST", kOllamaChatPath,
                R"({"messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":3}})");
  REQUIRE(ollama);
  REQUIRE(ollama->status == 200);
  REQUIRE(json::parse(ollama->body)["done"] == true);
}

TEST_CASE("JSON-level errors keep the connection alive for the next request") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  std::vector<MalformedCase> cases = json_level_cases();
  for (MalformedCase& o : ollama_cases()) cases.push_back(std::move(o));
  for (size_t i = 0; i < cases.size(); i += 7) {
    INFO(cases[i].name);
    REQUIRE(c.send(cases[i].raw));
    auto r = c.read_reply();
    REQUIRE(r);
    REQUIRE(r->status == cases[i].status);
    REQUIRE(r->header("connection") != "close");
  }
  REQUIRE(c.send(http_request("POST", kCompletionsPath, completion_base().dump())));
  REQUIRE(c.read_reply()->status == 200);
}
