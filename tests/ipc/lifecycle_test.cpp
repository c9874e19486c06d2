// Connections and listeners over time: a client that leaves mid-generation frees its
// sequence; stale sockets are replaced, live ones and other files are not; permissions;
// stop_accepting and stop; the queue bound; TCP listener checks; connection limits.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

// A generation long enough to be interrupted: no max_tokens, so it runs to the context.
const char* kLongStream = R"({"prompt":"Tell me a long story","stream":true,"temperature":1,"seed":3})";
const char* kLongWhole = R"({"prompt":"Tell me a long story","temperature":1,"seed":3})";

// Binds a Unix socket at path and closes it without unlinking: a crash's leftover.
void leave_stale_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(fd);
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// A server whose long streams (kLongStream runs to the context) last 8192 tokens, so that a
// test sees them running even when this thread is descheduled for a while on a loaded
// machine; with the default 512 the synthetic model can finish one in ~0.1 s.
TestServerOptions long_streams() {
  TestServerOptions o;
  o.scheduler.n_ctx = 8192;
  return o;
}

}  // namespace

TEST_CASE("A client that disconnects mid-stream has its sequence cancelled and freed") {
  TestServer s(long_streams());
  const uint64_t cancelled_before = s.scheduler().stats().cancelled_total;
  {
    HttpConn c = HttpConn::unix_socket(s.socket_path());
    REQUIRE(c.send(http_request("POST", "/v1/completions", kLongStream)));
    auto head = c.read_head();
    REQUIRE(head);
    REQUIRE(head->status == 200);
    REQUIRE(eventually([&] { return s.scheduler().stats().running == 1; }));
  }  // closed here, while tokens flow
  REQUIRE(eventually([&] { return s.scheduler().stats().cancelled_total == cancelled_before + 1; }));
  REQUIRE(eventually([&] { return s.scheduler().stats().running == 0; }));
  REQUIRE(eventually([&] { return s.scheduler().stats().kv_blocks_used == 0; }));
  REQUIRE(eventually([&] { return s.server().open_connections() == 0; }));
}

TEST_CASE("A client that disconnects while waiting for a whole answer is noticed without any write") {
  TestServer s(long_streams());
  const uint64_t cancelled_before = s.scheduler().stats().cancelled_total;
  {
    HttpConn c = HttpConn::unix_socket(s.socket_path());
    REQUIRE(c.send(http_request("POST", "/v1/chat/completions",
                                R"({"messages":[{"role":"user","content":"Tell me a long story"}],"seed":3})")));
    REQUIRE(eventually([&] { return s.scheduler().stats().running == 1; }));
  }
  REQUIRE(eventually([&] { return s.scheduler().stats().cancelled_total == cancelled_before + 1; }));
  REQUIRE(eventually([&] { return s.scheduler().stats().running == 0; }));
}

TEST_CASE("A full queue answers 429 and the server keeps serving") {
  TestServerOptions o = long_streams();
  o.scheduler.n_parallel = 1;
  o.scheduler.queue_max = 0;
  TestServer s(o);
  // The one sequence is taken by a stream of 8192 tokens; a second request must get 429.
  // If this thread was descheduled until the stream had ended, the second request is
  // served (200) and the round is tried again: a server that never answers 429 fails
  // every round.
  bool saw_429 = false;
  for (int round = 0; round < 10 && !saw_429; ++round) {
    const uint64_t generated_before = s.scheduler().stats().generated_tokens_total;
    HttpConn busy = HttpConn::unix_socket(s.socket_path());
    REQUIRE(busy.send(http_request("POST", "/v1/completions", kLongStream)));
    REQUIRE(busy.read_head()->status == 200);
    // Admitted (running), or already run to its end (nearly 8192 tokens generated).
    REQUIRE(eventually([&] {
      const SchedulerStats st = s.scheduler().stats();
      return st.running == 1 || st.generated_tokens_total > generated_before + 8000;
    }));
    auto r = http_call(s.socket_path(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})");
    REQUIRE(r);
    INFO("round " << round << ": status " << r->status);
    REQUIRE((r->status == 429 || r->status == 200));
    if (r->status == 429) {
      saw_429 = true;
      CHECK(json::parse(r->body)["error"]["code"] == "queue_full");
    }
    busy.close();
    REQUIRE(eventually([&] { return s.scheduler().stats().running == 0; }));
  }
  REQUIRE(saw_429);
  auto r = http_call(s.socket_path(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
}

TEST_CASE("After stop_accepting generation gets 503 with Connection: close and the socket file is gone") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());  // connected before: stays served
  REQUIRE(c.send(http_request("GET", "/health")));
  REQUIRE(c.read_reply()->status == 200);
  s.server().stop_accepting();
  REQUIRE(eventually([&] { return !is_socket(s.socket_path()); }));
  REQUIRE(c.send(http_request("POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})")));
  auto r = c.read_reply();
  REQUIRE(r);
  REQUIRE(r->status == 503);
  REQUIRE(r->header("connection") == "close");
  REQUIRE(json::parse(r->body)["error"]["code"] == "shutting_down");
  REQUIRE(c.wait_closed());
  REQUIRE(!HttpConn::unix_socket(s.socket_path()).connected());
}

TEST_CASE("stop() closes open connections and run() returns") {
  // A context far longer than the test needs: the generation is still running when stop()
  // comes, however slowly this thread gets there.
  TestServerOptions o;
  o.scheduler.n_ctx = 8192;
  TestServer* s = new TestServer(o);
  HttpConn idle = HttpConn::unix_socket(s->socket_path());
  HttpConn streaming = HttpConn::unix_socket(s->socket_path());
  REQUIRE(idle.send(http_request("GET", "/health")));
  REQUIRE(idle.read_reply()->status == 200);
  REQUIRE(streaming.send(http_request("POST", "/v1/completions", kLongWhole)));
  REQUIRE(eventually([&] { return s->scheduler().stats().running == 1; }));
  delete s;  // stop(), join run()
  REQUIRE(idle.wait_closed());
  // Closed before the whole answer: stop() did not wait for the generation to end.
  REQUIRE_FALSE(streaming.read_reply());
}

TEST_CASE("A stale socket file is replaced, and a live one and other files are reported and left alone") {
  TempDir dir;
  const std::string path = dir.file("h.sock");
  leave_stale_socket(path);
  REQUIRE(is_socket(path));
  ipc::Server a(ipc::ServerOptions{});
  Status st = a.listen_unix(path);
  REQUIRE(st.ok());
  std::thread ta([&] { a.run(); });
  REQUIRE(HttpConn::unix_socket(path).connected());

  ipc::Server b(ipc::ServerOptions{});
  st = b.listen_unix(path);
  REQUIRE(!st.ok());
  REQUIRE(st.error().message == "another hearthd is already listening on " + path);
  REQUIRE(HttpConn::unix_socket(path).connected());  // a still serves
  {
    HttpConn c = HttpConn::unix_socket(path);
    REQUIRE(c.send(http_request("GET", "/health")));
    REQUIRE(c.read_reply()->status == 503);  // a has no engine: loading
  }
  a.stop();
  ta.join();
  REQUIRE(!is_socket(path));  // a unlinked what it created

  const std::string file = dir.file("not-a-socket");
  std::ofstream(file) << "precious";
  st = b.listen_unix(file);
  REQUIRE(!st.ok());
  REQUIRE(st.error().message.find("not a socket") != std::string::npos);
  std::ifstream in(file);
  std::string content;
  in >> content;
  REQUIRE(content == "precious");

  st = b.listen_unix(dir.file("missing-dir/h.sock"));
  REQUIRE(!st.ok());
}

TEST_CASE("listen_unix applies the mode and the group, and refuses an unknown group") {
  TempDir dir;
  ipc::Server s(ipc::ServerOptions{});
  REQUIRE(s.listen_unix(dir.file("a.sock")).ok());
  struct stat st {};
  REQUIRE(::stat(dir.file("a.sock").c_str(), &st) == 0);
  REQUIRE((st.st_mode & 07777) == 0600);

  const gid_t gid = ::getegid();
  const group* g = ::getgrgid(gid);
  REQUIRE(g != nullptr);
  REQUIRE(s.listen_unix(dir.file("b.sock"), 0660, g->gr_name).ok());
  REQUIRE(::stat(dir.file("b.sock").c_str(), &st) == 0);
  REQUIRE((st.st_mode & 07777) == 0660);
  REQUIRE(st.st_gid == gid);

  Status bad = s.listen_unix(dir.file("c.sock"), 0660, "no-such-group-hearth");
  REQUIRE(!bad.ok());
  REQUIRE(bad.error().message.find("does not exist") != std::string::npos);
  REQUIRE(!is_socket(dir.file("c.sock")));
  s.stop_accepting();
  REQUIRE(!is_socket(dir.file("a.sock")));
  REQUIRE(!is_socket(dir.file("b.sock")));
}

TEST_CASE("An adopted Unix socket is served, and its file is not unlinked by stop_accepting") {
  TempDir dir;
  const std::string path = dir.file("adopted.sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  ipc::Server s(ipc::ServerOptions{});
  REQUIRE(s.adopt_unix_fd(fd).ok());
  std::thread t([&] { s.run(); });
  {
    HttpConn c = HttpConn::unix_socket(path);
    REQUIRE(c.send(http_request("GET", "/metrics")));
    REQUIRE(c.read_reply()->status == 200);
  }
  s.stop_accepting();
  // Once the listener is closed (connections refused), stop_accepting has done all it does.
  REQUIRE(eventually([&] { return !HttpConn::unix_socket(path).connected(); }));
  REQUIRE(is_socket(path));
  s.stop();
  t.join();

  const int not_listening = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(!s.adopt_unix_fd(not_listening).ok());
  ::close(not_listening);
  REQUIRE(!s.adopt_unix_fd(-1).ok());
}

TEST_CASE("listen_tcp takes loopback addresses unless allow_remote and rejects malformed ones") {
  ipc::Server s(ipc::ServerOptions{});
  REQUIRE(s.listen_tcp("127.0.0.1:0", false).ok());
  REQUIRE(s.listen_tcp("localhost:0", false).ok());
  REQUIRE(!s.listen_tcp("0.0.0.0:0", false).ok());
  REQUIRE(!s.listen_tcp("8.8.8.8:80", false).ok());
  REQUIRE(!s.listen_tcp("127.0.0.1", false).ok());
  REQUIRE(!s.listen_tcp("127.0.0.1:99999", false).ok());
  REQUIRE(!s.listen_tcp("example.com:80", false).ok());
  REQUIRE(!s.listen_tcp(":80", false).ok());
  REQUIRE(s.listen_tcp("0.0.0.0:0", true).ok());
}

TEST_CASE("At the connection limit a new connection replaces the one that waited longest for a request") {
  TestServerOptions o;
  o.server.max_connections = 2;
  o.server.header_timeout = kHangGuard;  // only the limit can close a connection here
  TestServer s(o);
  HttpConn a = HttpConn::unix_socket(s.socket_path());
  REQUIRE(a.send(http_request("GET", "/health")));
  REQUIRE(a.read_reply()->status == 200);
  HttpConn b = HttpConn::unix_socket(s.socket_path());  // idle since after a
  REQUIRE(b.send(http_request("GET", "/health")));
  REQUIRE(b.read_reply()->status == 200);
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.send(http_request("GET", "/health")));
  REQUIRE(c.read_reply()->status == 200);
  REQUIRE(a.wait_closed());
  REQUIRE(b.send(http_request("GET", "/health")));  // b is still served
  REQUIRE(b.read_reply()->status == 200);
}

TEST_CASE("When every connection is serving a request, a new one gets 503 with Retry-After") {
  TestServerOptions o;
  o.server.max_connections = 2;
  o.server.header_timeout = kHangGuard;
  o.server.body_timeout = kHangGuard;
  TestServer s(o);
  // Two requests whose bodies are still arriving: busy, not idle.
  const std::string partial =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000\r\n\r\n{\"prompt\":";
  HttpConn a = HttpConn::unix_socket(s.socket_path());
  HttpConn b = HttpConn::unix_socket(s.socket_path());
  REQUIRE(a.send(partial));
  REQUIRE(b.send(partial));
  // Both headers read: nothing idle is left to give up.
  REQUIRE(eventually([&] { return s.server().open_connections() == 2 && s.server().idle_connections() == 0; }));
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  // The server refuses at accept and closes: when it gets there before the client's request
  // is sent (a busy machine can pause the client between connect and send), the send fails
  // (EPIPE), and the 503 already written is still there to read.
  (void)c.send(http_request("GET", "/health"));
  const std::optional<HttpReply> r = c.read_reply();
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(r->header("retry-after") == "1");
  CHECK(r->body.find("too_many_connections") != std::string::npos);
  a.close();
  REQUIRE(eventually([&] { return s.server().open_connections() == 1; }));
  auto ok = http_call(s.socket_path(), "GET", "/health");
  REQUIRE(ok);
  REQUIRE(ok->status == 200);
}

TEST_CASE("500 connections that never send a request do not keep /health or a request out") {
  TestServerOptions o;
  o.server.header_timeout = kHangGuard;  // they would stay until then
  TestServer s(o);
  std::vector<HttpConn> idle;
  for (int i = 0; i < 500; ++i) {
    idle.push_back(HttpConn::unix_socket(s.socket_path()));
    REQUIRE(idle.back().connected());
    if (i % 2 == 0) REQUIRE(idle.back().send("GET /health HTTP/1.1\r\nHo"));  // half a header
  }
  for (int i = 0; i < 3; ++i) {
    auto r = http_call(s.socket_path(), "GET", "/health");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  CHECK(s.server().open_connections() <= static_cast<int64_t>(o.server.max_connections) + 1);
}

TEST_CASE("An idle keep-alive connection is closed after idle_timeout") {
  TestServerOptions o;
  o.server.idle_timeout = 300ms;
  TestServer s(o);
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  // Measured from before the request, so the server's idle time (from its response) lies
  // within it: closed eventually, and not before idle_timeout, however slow this thread is.
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(c.send(http_request("GET", "/health")));
  REQUIRE(c.read_reply()->status == 200);
  REQUIRE(c.wait_closed());
  REQUIRE(std::chrono::steady_clock::now() - start >= o.server.idle_timeout);
}
