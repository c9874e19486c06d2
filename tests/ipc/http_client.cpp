#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace hearth::test {
namespace {

// Catch's messages are for the test's main thread only (Catch is not thread-safe); reads on
// other threads (api_test's concurrent clients) write the message to stderr instead.
const std::thread::id kMainThread = std::this_thread::get_id();

void hang_message(const std::string& text) {
  if (std::this_thread::get_id() == kMainThread) {
    UNSCOPED_INFO(text);
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
}

}  // namespace

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

}  // namespace

std::string HttpReply::header(const std::string& name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

HttpConn HttpConn::unix_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return HttpConn(fd);
  if (fd >= 0) ::close(fd);
  return HttpConn(-1);
}

HttpConn HttpConn::tcp(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return HttpConn(fd);
  if (fd >= 0) ::close(fd);
  return HttpConn(-1);
}

HttpConn::HttpConn(HttpConn&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) {
  o.fd_ = -1;
}

HttpConn& HttpConn::operator=(HttpConn&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
  }
  return *this;
}

HttpConn::~HttpConn() {
  close();
}

void HttpConn::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpConn::send(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpConn::fill(int timeout_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0) return false;
  char tmp[16384];
  const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

bool HttpConn::read_until(std::string_view marker, int timeout_ms, size_t* pos) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const size_t p = buf_.find(marker);
    if (p != std::string::npos) {
      *pos = p;
      return true;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !fill(static_cast<int>(left.count()))) {
      if (std::chrono::steady_clock::now() >= deadline)
        hang_message("hang guard: no \"" + std::string(marker) + "\" from the server within " +
                     std::to_string(timeout_ms) + " ms; buffered: \"" + buf_ + "\"");
      return false;
    }
  }
}

bool HttpConn::read_exact(size_t n, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (buf_.size() < n) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !fill(static_cast<int>(left.count()))) {
      if (std::chrono::steady_clock::now() >= deadline)
        hang_message("hang guard: " + std::to_string(n) + " bytes of body did not come within " +
                     std::to_string(timeout_ms) + " ms; got " + std::to_string(buf_.size()));
      return false;
    }
  }
  return true;
}

std::optional<HttpReply> HttpConn::read_head(int timeout_ms) {
  size_t end = 0;
  if (!read_until("\r\n\r\n", timeout_ms, &end)) return std::nullopt;
  const std::string head = buf_.substr(0, end);
  buf_.erase(0, end + 4);
  HttpReply r;
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  r.status = std::atoi(status_line.c_str() + 9);
  while (line_end != std::string::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    r.headers[lower(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  return r;
}

std::optional<HttpReply> HttpConn::read_reply(int timeout_ms) {
  std::optional<HttpReply> r = read_head(timeout_ms);
  if (!r) return std::nullopt;
  if (r->status == 100) return read_reply(timeout_ms);
  if (r->status == 204 || r->status == 304) return r;  // never a body (RFC 9112 6.3)
  if (lower(r->header("transfer-encoding")) == "chunked") {
    for (;;) {
      size_t eol = 0;
      if (!read_until("\r\n", timeout_ms, &eol)) return std::nullopt;
      const size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
      buf_.erase(0, eol + 2);
      if (size == 0) {
        if (!read_until("\r\n", timeout_ms, &eol)) return std::nullopt;  // no trailers from hearth
        buf_.erase(0, eol + 2);
        return r;
      }
      if (!read_exact(size + 2, timeout_ms)) return std::nullopt;
      r->body += buf_.substr(0, size);
      buf_.erase(0, size + 2);
    }
  }
  if (!r->header("content-length").empty()) {
    const size_t n = std::strtoul(r->header("content-length").c_str(), nullptr, 10);
    if (!read_exact(n, timeout_ms)) return std::nullopt;
    r->body = buf_.substr(0, n);
    buf_.erase(0, n);
    return r;
  }
  while (fill(timeout_ms)) {
  }
  r->body = std::move(buf_);
  buf_.clear();
  return r;
}

bool HttpConn::wait_closed(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    const int rc = left.count() <= 0 ? 0 : ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      hang_message("hang guard: the server did not close the connection within " + std::to_string(timeout_ms) + " ms");
      return false;
    }
    char tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return true;
  }
}

std::optional<HttpReply> http_call(const std::string& socket_path, const std::string& method, const std::string& target,
                                   const std::string& body) {
  HttpConn c = HttpConn::unix_socket(socket_path);
  if (!c.connected() || !c.send(http_request(method, target, body))) return std::nullopt;
  return c.read_reply();
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    if (line.compare(0, 6, "data: ") == 0) out.push_back(line.substr(6));
    pos = end + 1;
  }
  return out;
}

}  // namespace hearth::test
