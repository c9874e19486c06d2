// A small blocking HTTP/1.1 client over raw POSIX sockets, for the ipc tests: it sends
// exactly the bytes a test writes (malformed ones included) and reads responses with
// Content-Length, chunked bodies, or up to the close.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/test_util.h"

namespace hearth::test {

// Every read below waits at most this long by default: kHangGuard, a guard against a hang
// and not a performance bound. When it expires the read adds a message saying what it
// waited for to the failing check that follows.
inline constexpr int kHangGuardMs = static_cast<int>(kHangGuard.count());

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
  std::string header(const std::string& name) const;
};

class HttpConn {
 public:
  static HttpConn unix_socket(const std::string& path);
  static HttpConn tcp(uint16_t port);  // 127.0.0.1
  HttpConn(HttpConn&& o) noexcept;
  HttpConn& operator=(HttpConn&& o) noexcept;
  ~HttpConn();

  bool connected() const { return fd_ >= 0; }
  // False when the peer closed or reset (no SIGPIPE).
  bool send(std::string_view data);
  // One whole response; nullopt on a timeout or a close before a complete response.
  std::optional<HttpReply> read_reply(int timeout_ms = kHangGuardMs);
  // Reads until the status line and headers are in; the rest stays buffered.
  std::optional<HttpReply> read_head(int timeout_ms = kHangGuardMs);
  // True when the peer closes (EOF or reset) within timeout_ms, discarding anything sent.
  bool wait_closed(int timeout_ms = kHangGuardMs);
  void close();

 private:
  explicit HttpConn(int fd) : fd_(fd) {}
  // Appends at least one byte to buf_; false on close, error or timeout.
  bool fill(int timeout_ms);
  bool read_until(std::string_view marker, int timeout_ms, size_t* pos);
  bool read_exact(size_t n, int timeout_ms);

  int fd_ = -1;
  std::string buf_;
};

// "METHOD target HTTP/1.1" with Host, Content-Length (when body is not empty or method is
// POST) and extra header lines ("Name: value\r\n" each). Inline: the fuzzer's seed cases
// (malformed_cases.cpp) use it without the rest of this client.
inline std::string http_request(const std::string& method, const std::string& target, const std::string& body = "",
                                const std::string& extra_headers = "", const std::string& host = "localhost") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

// One request on a fresh connection to a Unix socket; nullopt when no response came.
std::optional<HttpReply> http_call(const std::string& socket_path, const std::string& method, const std::string& target,
                                   const std::string& body = "");

// The payloads of the "data: ..." lines of an SSE body, in order.
std::vector<std::string> sse_payloads(const std::string& body);

}  // namespace hearth::test
