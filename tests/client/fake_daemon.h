// A scripted stand-in for hearthd on a Unix socket, for testing libhearth-client without the
// real daemon: it accepts connections one at a time on its own thread, reads each HTTP
// request (headers and Content-Length body), records it, and lets the test's handler write
// the raw response bytes. Only POSIX sockets, so it shares nothing with the client's code.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace hearth::test {

inline bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Response building blocks. keep_alive: no "Connection: close", so the client may send its
// next request on the same connection.
inline std::string http_response(int status, const std::string& content_type, const std::string& body,
                                 bool keep_alive = false) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + (keep_alive ? "" : "Connection: close\r\n") +
         "\r\n" + body;
}
inline std::string sse_head(bool keep_alive = false) {
  return std::string(
             "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
             "Transfer-Encoding: chunked\r\n") +
         (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}
inline std::string http_chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}
inline std::string sse_event(const std::string& json) {
  return http_chunk("data: " + json + "\n\n");
}
inline std::string last_chunk() {
  return "0\r\n\r\n";
}

// Blocks until the peer closes (read returns 0) or `guard` passes; true when it closed. A
// stream that "stalls" waits here: it never ends on its own, so a client that returns did
// so because it cancelled; false means the client never closed (a hang, not slowness).
inline bool wait_for_close(int fd, std::chrono::milliseconds guard = kHangGuard) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  char buf[256];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return true;
  }
}

// Waits until thread `tid` of this process is asleep in the kernel (state S in
// /proc/self/task/<tid>/stat): the client thread blocked in its read, so that a cancel from
// another thread lands there rather than between two reads. False after `guard`.
inline bool wait_until_asleep(pid_t tid, std::chrono::milliseconds guard = kHangGuard) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  return eventually(
      [&] {
        char buf[512] = {};
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
        ::close(fd);
        const char* paren = n > 0 ? std::strrchr(buf, ')') : nullptr;  // "pid (comm) S ..."
        return paren != nullptr && paren[1] == ' ' && paren[2] == 'S';
      },
      guard);
}

// One HTTP request as a fake daemon reads it.
struct FakeRequest {
  std::string head;  // request line and headers
  std::string body;
};

// Reads one request (headers and Content-Length body) from fd; false when the peer closed
// or sent nothing for `guard`.
inline bool read_http_request(int fd, FakeRequest* out, std::chrono::milliseconds guard = kHangGuard) {
  std::string data;
  char buf[4096];
  auto read_more = [&](std::string* into) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(guard.count())) <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return false;
    into->append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t end;
  while ((end = data.find("\r\n\r\n")) == std::string::npos) {
    if (!read_more(&data)) return false;
  }
  out->head = data.substr(0, end);
  size_t length = 0;
  std::string lower = out->head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (size_t at = lower.find("content-length:"); at != std::string::npos) {
    length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
  }
  out->body = data.substr(end + 4);
  while (out->body.size() < length) {
    if (!read_more(&out->body)) return false;
  }
  return true;
}

// A Unix socket for tests that script the daemon's side connection by connection (a
// thread of the test accepts and answers). Bound and listening at construction, unless
// told to wait: then bind() and listen() make the socket appear later, as a restarting
// daemon's does.
class UnixListener {
 public:
  explicit UnixListener(std::string path, bool now = true) : path_(std::move(path)) {
    if (now && !(bind() && listen())) throw std::runtime_error("cannot listen on " + path_);
  }
  ~UnixListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  const std::string& path() const { return path_; }
  // Creates the socket file; connecting is refused until listen().
  bool bind() {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    return fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  bool listen() { return ::listen(fd_, 16) == 0; }
  // The next connection, or -1 when none came within guard.
  int accept(std::chrono::milliseconds guard = kHangGuard) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(guard.count())) <= 0) return -1;
    return ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }
  // Whether a connection waits to be accepted (a client connected again).
  bool has_pending_connection() {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class FakeDaemon {
 public:
  using Request = FakeRequest;
  // Writes the response for a request on fd (the connection is closed after it returns).
  using Handler = std::function<void(const Request&, int fd)>;

  explicit FakeDaemon(Handler handler) : handler_(std::move(handler)) {
    path_ = dir_.file("fake.sock");
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listen_fd_, 16) != 0) {
      throw std::runtime_error("fake daemon: cannot listen on " + path_);
    }
    if (::pipe(stop_pipe_) != 0) throw std::runtime_error("pipe failed");
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeDaemon() {
    char byte = 's';
    (void)!::write(stop_pipe_[1], &byte, 1);
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
  }
  const std::string& path() const { return path_; }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents) return;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Request request;
      if (read_http_request(fd, &request)) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          requests_.push_back(request);
        }
        handler_(request, fd);
      }
      ::close(fd);
    }
  }

  TempDir dir_;
  std::string path_;
  Handler handler_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<Request> requests_;
};

}  // namespace hearth::test
