// Kept connections to upstreams (fetch/http.h, keep_alive_max): against a real server in this
// process (tests/fetch/keepalive_server.h) that counts the connections it accepts, over
// loopback TCP, a Unix socket and TLS.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "fetch/http.h"
#include "keepalive_server.h"

using namespace hearth;
using namespace hearth::fetch;
using keepalive_test::Server;
using Tcp = boost::asio::ip::tcp;
using Local = boost::asio::local::stream_protocol;

namespace {

std::unique_ptr<Server<Tcp>> tcp_server(bool tls = false) {
  return std::make_unique<Server<Tcp>>(Tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0), tls);
}

HttpRequest kept(const std::string& base, const std::string& path) {
  HttpRequest r;
  r.url = base + path;
  r.timeout_s = 5;
  r.keep_alive_max = 4;
  return r;
}

std::string tcp_base(const Server<Tcp>& s, const char* scheme = "http") {
  return std::string(scheme) + "://127.0.0.1:" + std::to_string(s.endpoint().port());
}

// The body of a GET, or the error; outcome says how it went.
Result<std::string> get(const HttpRequest& r, HttpOutcome* outcome = nullptr) {
  std::string body;
  Result<HttpResponse> res = http_request(
      r, [](const HttpResponse&) { return Status{}; },
      [&](const char* data, size_t n) {
        body.append(data, n);
        return Status{};
      },
      outcome);
  if (!res) return res.error();
  return body;
}

struct CleanPool {
  CleanPool() { close_idle_connections(); }
  ~CleanPool() { close_idle_connections(); }
};

}  // namespace

TEST_CASE("sequential requests to one place share one kept connection", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  const std::string base = tcp_base(*server);
  const std::vector<std::string> paths = {"/small", "/chunked", "/big", "/small", "/small"};
  for (size_t i = 0; i < paths.size(); ++i) {
    HttpOutcome outcome;
    Result<std::string> body = get(kept(base, paths[i]), &outcome);
    REQUIRE(body);
    CHECK(body->size() == (paths[i] == "/big" ? size_t{1} << 20 : 5));
    CHECK(outcome.reused == (i > 0));
  }
  CHECK(server->settings.accepted == 1);
  CHECK(server->settings.answered == 5);
  CHECK(idle_connections() == 1);
}

TEST_CASE("requests over a Unix socket share one kept connection", "[fetch][keepalive]") {
  CleanPool clean;
  const std::string path = "/tmp/hearth-keepalive-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  Server<Local> server{Local::endpoint(path)};
  for (int i = 0; i < 3; ++i) {
    HttpRequest r = kept("http://localhost", "/chunked");
    r.unix_socket = path;
    REQUIRE(get(r));
  }
  CHECK(server.settings.accepted == 1);
  ::unlink(path.c_str());
}

TEST_CASE("without keep_alive_max every request opens its own connection", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  for (int i = 0; i < 3; ++i) {
    HttpRequest r = kept(tcp_base(*server), "/small");
    r.keep_alive_max = 0;
    REQUIRE(get(r));
  }
  CHECK(server->settings.accepted == 3);
  CHECK(idle_connections() == 0);
}

TEST_CASE("an answer with Connection: close is not kept", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  server->settings.close_after = true;
  for (int i = 0; i < 3; ++i) REQUIRE(get(kept(tcp_base(*server), "/small")));
  CHECK(server->settings.accepted == 3);
  CHECK(idle_connections() == 0);
}

TEST_CASE("a kept connection the server closed while idle is not used", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  REQUIRE(get(kept(tcp_base(*server), "/small")));
  server->close_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the FIN reaches the client
  HttpOutcome outcome;
  REQUIRE(get(kept(tcp_base(*server), "/small"), &outcome));
  CHECK_FALSE(outcome.reused);
  CHECK_FALSE(outcome.stale_retried);
  CHECK(server->settings.accepted == 2);
}

TEST_CASE("a kept connection closed as the request arrives is retried once on a new one", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  REQUIRE(get(kept(tcp_base(*server), "/small")));
  server->settings.drop_reused = true;  // the next request on that connection: closed unanswered
  HttpOutcome outcome;
  Result<std::string> body = get(kept(tcp_base(*server), "/small"), &outcome);
  REQUIRE(body);
  CHECK(*body == "hello");
  CHECK(outcome.stale_retried);
  CHECK_FALSE(outcome.reused);
  CHECK(server->settings.accepted == 2);
  CHECK(server->settings.answered == 2);
}

TEST_CASE("a new connection closed before the answer is not retried", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  server->settings.drop_all = true;
  HttpOutcome outcome;
  CHECK_FALSE(get(kept(tcp_base(*server), "/small"), &outcome));
  CHECK_FALSE(outcome.stale_retried);
  CHECK(outcome.connected);
  CHECK_FALSE(outcome.got_header);
  CHECK(server->settings.accepted == 1);
}

TEST_CASE("a body stopped part way or a cancelled exchange is never kept", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  const HttpRequest r = kept(tcp_base(*server), "/big");
  Result<HttpResponse> stopped = http_request(
      r, [](const HttpResponse&) { return Status{}; },
      [](const char*, size_t) -> Status { return make_error("enough"); });
  CHECK_FALSE(stopped);
  CHECK(idle_connections() == 0);
  std::atomic<bool> cancelled{false};
  HttpRequest cr = kept(tcp_base(*server), "/stall");  // half a body, then the server stalls
  cr.cancelled = &cancelled;
  const auto t0 = std::chrono::steady_clock::now();
  Result<HttpResponse> cancel = http_request(
      cr, [](const HttpResponse&) { return Status{}; },
      [&](const char*, size_t) {
        cancelled = true;
        return Status{};
      });
  CHECK_FALSE(cancel);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(idle_connections() == 0);
  REQUIRE(get(kept(tcp_base(*server), "/small")));
  CHECK(server->settings.accepted == 3);
}

TEST_CASE("a kept connection idle past its limit is closed", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  HttpRequest r = kept(tcp_base(*server), "/small");
  r.keep_alive_idle_ms = 100;
  REQUIRE(get(r));
  CHECK(idle_connections() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  HttpOutcome outcome;
  REQUIRE(get(r, &outcome));
  CHECK_FALSE(outcome.reused);
  CHECK(server->settings.accepted == 2);
}

TEST_CASE("concurrent requests keep no more idle connections than allowed", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server();
  HttpRequest r = kept(tcp_base(*server), "/chunked");
  r.keep_alive_max = 2;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) ok += get(r) ? 1 : 0;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 20);
  CHECK(idle_connections() <= 2);
}

TEST_CASE("https requests reuse one verified TLS connection", "[fetch][keepalive]") {
  CleanPool clean;
  auto server = tcp_server(true);
  const std::string ca = "/tmp/hearth-keepalive-ca-" + std::to_string(::getpid()) + ".pem";
  std::ofstream(ca) << server->cert_pem();
  for (const char* path : {"/small", "/chunked", "/big"}) {
    HttpRequest r = kept(tcp_base(*server, "https"), path);
    r.ca_file = ca;
    REQUIRE(get(r));
  }
  CHECK(server->settings.accepted == 1);
  HttpRequest other_ca = kept(tcp_base(*server, "https"), "/small");  // another key: the system's CAs
  CHECK_FALSE(get(other_ca));
  CHECK(server->settings.accepted == 2);
  ::unlink(ca.c_str());
}
