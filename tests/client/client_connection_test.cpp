// libhearth-client's connection to the daemon: one kept-alive connection per handle, reused
// while the daemon keeps it open, replaced when it closed it, closed after a request that
// failed; and the read timeout. Each test scripts the daemon's side on a real Unix socket,
// connection by connection, on a thread of its own.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "hearth/client.h"

namespace {

using hearth::test::eventually;
using hearth::test::FakeRequest;
using hearth::test::http_chunk;
using hearth::test::http_response;
using hearth::test::last_chunk;
using hearth::test::read_http_request;
using hearth::test::sse_event;
using hearth::test::sse_head;
using hearth::test::TempDir;
using hearth::test::UnixListener;
using hearth::test::wait_for_close;
using hearth::test::write_all;
using Clock = std::chrono::steady_clock;

constexpr bool kKeepAlive = true;
const char* kHealthy = R"({"status":"ok"})";

std::string chat_chunk(const std::string& text) {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,)"
         R"("delta":{"content":")" +
         text + R"("},"finish_reason":null}]})";
}
std::string whole_chat(const std::string& text) {
  return R"({"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,)"
         R"("message":{"role":"assistant","content":")" +
         text + R"("},"finish_reason":"stop"}]})";
}
// A complete chunked stream of these pieces, on a kept-alive connection.
std::string stream_of(const std::vector<std::string>& pieces) {
  std::string out = sse_head(kKeepAlive);
  for (const std::string& p : pieces) out += sse_event(chat_chunk(p));
  return out + http_chunk("data: [DONE]\n\n") + last_chunk();
}

int collect(const char* piece, size_t len, void* user_data) {
  static_cast<std::vector<std::string>*>(user_data)->emplace_back(piece, len);
  return 0;
}

// A handle on the listener's socket, closed at the end of the scope.
struct Handle {
  explicit Handle(const UnixListener& listener) {
    REQUIRE(hearth_client_open(listener.path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("requests on one handle travel one after another on one kept-alive connection", "[client]") {
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::vector<FakeRequest> seen;
  std::atomic<bool> closed{false};
  std::thread daemon([&] {
    const int fd = listener.accept();
    if (fd < 0) return;
    FakeRequest r;
    if (read_http_request(fd, &r)) {
      seen.push_back(r);
      write_all(fd, stream_of({"Hel", "lo"}));
    }
    if (read_http_request(fd, &r)) {
      seen.push_back(r);
      write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
    }
    if (read_http_request(fd, &r)) {
      seen.push_back(r);
      write_all(fd, http_response(200, "application/json", whole_chat("again"), kKeepAlive));
    }
    closed = wait_for_close(fd);  // the handle closes its connection when it is closed
    ::close(fd);
  });
  {
    Handle h(listener);
    hearth_message m{"user", "hi"};
    std::vector<std::string> pieces;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &pieces, nullptr, nullptr) == HEARTH_OK);
    CHECK(pieces == std::vector<std::string>{"Hel", "lo"});
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
    char* text = nullptr;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, nullptr, nullptr, &text, nullptr) == HEARTH_OK);
    CHECK(std::string(text != nullptr ? text : "") == "again");
    hearth_free(text);
    CHECK_FALSE(listener.has_pending_connection());  // no second connection
  }
  daemon.join();
  REQUIRE(seen.size() == 3);
  for (const FakeRequest& r : seen) CHECK(r.head.find("Connection: close") == std::string::npos);
  CHECK(closed);
}

TEST_CASE("a kept connection the daemon closed while idle is replaced by a fresh one", "[client]") {
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::atomic<bool> first_closed{false};
  std::atomic<int> answered{0};
  std::thread daemon([&] {
    FakeRequest r;
    int fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) {
      write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
      ++answered;
    }
    ::close(fd);  // its idle timeout, its connection limit, or a restart
    first_closed = true;
    fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) {
      write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
      ++answered;
    }
    wait_for_close(fd);
    ::close(fd);
  });
  {
    Handle h(listener);
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
    REQUIRE(eventually([&] { return first_closed.load(); }));
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
  }
  daemon.join();
  CHECK(answered == 2);
}

TEST_CASE("a request whose kept connection closes before any byte of the answer is sent again, once", "[client]") {
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::vector<FakeRequest> seen;
  std::thread daemon([&] {
    FakeRequest r;
    int fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
    // The next request arrives as the daemon gives the connection up: it closes unanswered.
    if (read_http_request(fd, &r)) seen.push_back(r);
    ::close(fd);
    fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) {
      seen.push_back(r);
      write_all(fd, http_response(200, "application/json", whole_chat("fresh"), kKeepAlive));
    }
    wait_for_close(fd);
    ::close(fd);
  });
  {
    Handle h(listener);
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
    hearth_message m{"user", "once more"};
    char* text = nullptr;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, nullptr, nullptr, &text, nullptr) == HEARTH_OK);
    CHECK(std::string(text != nullptr ? text : "") == "fresh");
    hearth_free(text);
  }
  daemon.join();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].head.rfind("POST /v1/chat/completions ", 0) == 0);
  CHECK(seen[1].body == seen[0].body);
}

TEST_CASE("a fresh connection closed unanswered, or a kept one closed mid-answer, is not sent again", "[client]") {
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  SECTION("fresh connection: nothing can be stale, so the close is the daemon's answer") {
    std::thread daemon([&] {
      FakeRequest r;
      const int fd = listener.accept();
      if (fd < 0) return;
      read_http_request(fd, &r);
      ::close(fd);
    });
    Handle h(listener);
    CHECK(hearth_client_health(h.client) == HEARTH_ERR_IO);
    daemon.join();
    CHECK_FALSE(listener.has_pending_connection());
  }
  SECTION("kept connection: part of the answer came, so the daemon had begun the request") {
    std::thread daemon([&] {
      FakeRequest r;
      const int fd = listener.accept();
      if (fd < 0) return;
      if (read_http_request(fd, &r)) write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
      if (read_http_request(fd, &r)) write_all(fd, "HTTP/1.1 200 OK\r\nContent-");
      ::close(fd);
    });
    Handle h(listener);
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
    CHECK(hearth_client_health(h.client) == HEARTH_ERR_IO);
    daemon.join();
    CHECK_FALSE(listener.has_pending_connection());
  }
}

TEST_CASE("a request that ends before its answer is read whole closes its connection", "[client]") {
  // The callback stops the stream after its first piece: the rest of the answer is unread,
  // so the connection must not carry the next request.
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::atomic<bool> first_closed{false};
  std::thread daemon([&] {
    FakeRequest r;
    int fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) write_all(fd, sse_head(kKeepAlive) + sse_event(chat_chunk("one")));
    first_closed = wait_for_close(fd);  // the stream stalls; only the client can end it
    ::close(fd);
    fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
    wait_for_close(fd);
    ::close(fd);
  });
  {
    Handle h(listener);
    hearth_message m{"user", "hi"};
    auto stop_at_once = [](const char*, size_t, void*) -> int { return 1; };
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, stop_at_once, nullptr, nullptr, nullptr) ==
          HEARTH_ERR_CANCELLED);
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
  }
  daemon.join();
  CHECK(first_closed);
}

TEST_CASE("a daemon that sends nothing for the read timeout gives HEARTH_ERR_TIMEOUT", "[client]") {
  // Margins for a busy machine: each call must take at least the timeout (poll's own
  // guarantee) and returns in well under 10 s, 50 times the 200 ms timeout.
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::atomic<bool> unanswered_closed{false};
  std::atomic<bool> stalled_closed{false};
  std::thread daemon([&] {
    FakeRequest r;
    int fd = listener.accept();
    if (fd < 0) return;
    read_http_request(fd, &r);               // never answered
    unanswered_closed = wait_for_close(fd);  // until the client gives up
    ::close(fd);
    fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) write_all(fd, sse_head(kKeepAlive) + sse_event(chat_chunk("first")));
    stalled_closed = wait_for_close(fd);  // the stream stalls midway
    ::close(fd);
    fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) write_all(fd, http_response(200, "application/json", kHealthy, kKeepAlive));
    wait_for_close(fd);
    ::close(fd);
  });
  {
    Handle h(listener);
    REQUIRE(hearth_client_set_timeout(h.client, 200) == HEARTH_OK);
    hearth_message m{"user", "hi"};
    char* text = nullptr;
    auto start = Clock::now();
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, nullptr, nullptr, &text, nullptr) == HEARTH_ERR_TIMEOUT);
    double took_ms = ms_since(start);
    CHECK(took_ms >= 200);
    CHECK(took_ms < 10000);
    CHECK(text == nullptr);
    CHECK(std::string(hearth_client_last_error(h.client)).find("nothing for 200 ms") != std::string::npos);
    CHECK(hearth_client_http_status(h.client) == 0);

    std::vector<std::string> pieces;
    start = Clock::now();
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &pieces, nullptr, nullptr) == HEARTH_ERR_TIMEOUT);
    took_ms = ms_since(start);
    CHECK(took_ms >= 200);
    CHECK(took_ms < 10000);
    CHECK(pieces == std::vector<std::string>{"first"});
    CHECK(hearth_client_http_status(h.client) == 200);

    // The timed-out connections were closed; the next request gets a fresh one.
    CHECK(hearth_client_health(h.client) == HEARTH_OK);
  }
  daemon.join();
  CHECK(unanswered_closed);
  CHECK(stalled_closed);
}

TEST_CASE("the read timeout bounds each wait, not the whole stream", "[client]") {
  // Ten pieces 400 ms apart: the stream lasts about 4 s, longer than the 3 s timeout, and
  // no gap comes near it unless the machine stalls this thread for 2.6 s.
  TempDir dir;
  UnixListener listener(dir.file("d.sock"));
  std::thread daemon([&] {
    FakeRequest r;
    const int fd = listener.accept();
    if (fd < 0) return;
    if (read_http_request(fd, &r)) {
      write_all(fd, sse_head(kKeepAlive));
      for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        write_all(fd, sse_event(chat_chunk(std::to_string(i))));
      }
      write_all(fd, http_chunk("data: [DONE]\n\n") + last_chunk());
    }
    wait_for_close(fd);
    ::close(fd);
  });
  {
    Handle h(listener);
    REQUIRE(hearth_client_set_timeout(h.client, 3000) == HEARTH_OK);
    hearth_message m{"user", "hi"};
    std::vector<std::string> pieces;
    CHECK(hearth_client_chat(h.client, &m, 1, nullptr, collect, &pieces, nullptr, nullptr) == HEARTH_OK);
    CHECK(pieces.size() == 10);
  }
  daemon.join();
}
