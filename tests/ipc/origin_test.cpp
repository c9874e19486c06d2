// Web pages and the TCP listener (issue 22): a request carrying a foreign Origin is refused,
// an allowed origin gets CORS headers (and its preflight answered), and a POST body that
// is not application/json gets 415, so a page cannot send a "simple" cross-origin request
// that runs. The Unix socket is not a browser's to reach and keeps its old rules.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;

constexpr const char* kAllowed = "http://localhost:5173";
const std::string kBody = R"({"prompt": "hello world", "max_tokens": 1, "temperature": 0})";

// A request with exactly these headers (http_request() would add a JSON Content-Type).
std::string raw_request(const std::string& method, const std::string& target, const std::string& body,
                        const std::string& headers) {
  return method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + headers + "\r\n" + body;
}

struct TcpServer {
  TestServer s;
  uint16_t port = 0;
  static TestServerOptions options() {
    TestServerOptions o;
    o.server.allowed_origins = {kAllowed};
    return o;
  }
  TcpServer() : s(options()) { REQUIRE(s.server().adopt_tcp_fd(loopback_listener(&port), false).ok()); }
  HttpReply call(const std::string& method, const std::string& target, const std::string& body,
                 const std::string& headers) {
    HttpConn c = HttpConn::tcp(port);
    REQUIRE(c.send(raw_request(method, target, body, headers)));
    auto r = c.read_reply();
    REQUIRE(r);
    return *r;
  }
};

}  // namespace

TEST_CASE("On TCP a foreign Origin gets 403, whatever the method, before anything runs", "[ipc][origin]") {
  TcpServer t;
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/completions"}, {"GET", "/health"}, {"OPTIONS", "/v1/completions"}, {"DELETE", "/api/cache"}}) {
    INFO(method << " " << target);
    const HttpReply r = t.call(method, target, method == "POST" ? kBody : "",
                               "Origin: http://evil.example.com\r\nContent-Type: text/plain\r\n");
    REQUIRE(r.status == 403);
    CHECK(json::parse(r.body).at("error").at("message").get<std::string>().find("allowed_origins") !=
          std::string::npos);
    CHECK(r.header("access-control-allow-origin").empty());
  }
  // "null" (a sandboxed frame or a file:// page) is an origin like any other.
  CHECK(t.call("GET", "/health", "", "Origin: null\r\n").status == 403);
  CHECK(t.s.scheduler().stats().prompt_tokens_total == 0);  // nothing was generated
}

TEST_CASE("On TCP an allowed Origin gets CORS headers and its preflight is answered", "[ipc][origin]") {
  TcpServer t;
  const HttpReply pre = t.call("OPTIONS", "/v1/chat/completions", "",
                               std::string("Origin: ") + kAllowed +
                                   "\r\nAccess-Control-Request-Method: POST\r\n"
                                   "Access-Control-Request-Headers: content-type\r\n");
  REQUIRE(pre.status == 204);
  CHECK(pre.header("content-length").empty());  // RFC 9110 8.6: none on a 204
  CHECK(pre.header("access-control-allow-origin") == kAllowed);
  CHECK(pre.header("access-control-allow-methods").find("POST") != std::string::npos);
  CHECK(pre.header("access-control-allow-headers").find("Content-Type") != std::string::npos);

  const HttpReply r = t.call("POST", "/v1/completions", kBody,
                             std::string("Origin: ") + kAllowed + "\r\nContent-Type: application/json\r\n");
  REQUIRE(r.status == 200);
  CHECK(r.header("access-control-allow-origin") == kAllowed);
  CHECK(r.header("vary") == "Origin");
  // Without an Origin (curl, SDKs) nothing changes, and no CORS header is sent.
  const HttpReply plain = t.call("POST", "/v1/completions", kBody, "Content-Type: application/json; charset=utf-8\r\n");
  REQUIRE(plain.status == 200);
  CHECK(plain.header("access-control-allow-origin").empty());
}

TEST_CASE("On TCP a POST body that is not application/json gets 415, and the Unix socket keeps its rules",
          "[ipc][origin]") {
  TcpServer t;
  for (const std::string& type :
       {std::string("Content-Type: text/plain\r\n"), std::string("Content-Type: application/x-www-form-urlencoded\r\n"),
        std::string("Content-Type: multipart/form-data; boundary=x\r\n"), std::string()}) {
    INFO(type);
    const HttpReply r = t.call("POST", "/v1/completions", kBody, type);
    REQUIRE(r.status == 415);
    CHECK(json::parse(r.body).at("error").at("code") == "unsupported_media_type");
  }
  CHECK(t.s.scheduler().stats().prompt_tokens_total == 0);
  HttpConn c = HttpConn::unix_socket(t.s.socket_path());
  REQUIRE(c.send(raw_request("POST", "/v1/completions", kBody, "Content-Type: text/plain\r\n")));
  auto unix_reply = c.read_reply();
  REQUIRE(unix_reply);
  CHECK(unix_reply->status == 200);
}
