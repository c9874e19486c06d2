// HTTP/1.1 over a Unix socket with Boost.Beast, synchronously, with error codes only (no
// exception escapes: callers sit behind the C boundary). Beast reads and writes through
// SocketStream, which waits in poll(2) with the read timeout before each system call.
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hearth::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr size_t kBodyPieceBytes = 16 * 1024;  // one read's worth of body handed to the sink
// Connect retries while the socket is absent: the first after 10 ms, each wait twice the
// last, at most 200 ms (a restart takes from milliseconds to a second or two).
constexpr int kFirstRetryDelayMs = 10;
constexpr int kMaxRetryDelayMs = 200;
// A wait between retries looks at the cancel flag this often (cancel() cannot wake a sleep:
// nothing is registered to shut down yet).
constexpr int kCancelPollMs = 5;

std::string errno_text(int err) {
  return std::strerror(err);
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, std::numeric_limits<int>::max()));
}

// Connects a non-blocking AF_UNIX socket once and returns it in *out_fd. A full backlog
// (EAGAIN) is retried until kConnectTimeoutMs; everything else fails at once. *absent: the
// failure was ENOENT or ECONNREFUSED (no socket file, or nobody listening on it), which a
// restarting daemon shows for a moment.
Outcome connect_unix(const std::string& path, const CancelState& cancel, int* out_fd, bool* absent) {
  *out_fd = -1;
  *absent = false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "socket path is empty or longer than " +
                                                             std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());

  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Outcome::failure(HEARTH_ERR_IO, "socket(): " + errno_text(errno));

  auto deadline = Clock::now() + std::chrono::milliseconds(Transport::kConnectTimeoutMs);
  for (;;) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN && Clock::now() < deadline && !cancel.requested()) {
      ::poll(nullptr, 0, 10);  // the listener's backlog is full: it is busy accepting
      continue;
    }
    ::close(fd);
    if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
    switch (err) {
      case ENOENT:
        *absent = true;
        return Outcome::failure(HEARTH_ERR_NO_DAEMON, "no socket at " + path);
      case ENOTDIR:
        return Outcome::failure(HEARTH_ERR_NO_DAEMON, "no socket at " + path);
      case ECONNREFUSED:
        *absent = true;
        return Outcome::failure(HEARTH_ERR_NO_DAEMON, "nothing is listening on " + path);
      case EAGAIN:
        return Outcome::failure(HEARTH_ERR_IO, "the daemon on " + path + " accepts no connections (backlog full)");
      default:
        return Outcome::failure(HEARTH_ERR_IO, "cannot connect to " + path + ": " + errno_text(err));
    }
  }
  *out_fd = fd;
  return Outcome::success();
}

// Sleeps ms milliseconds unless cancelled first; false when cancelled.
bool sleep_unless_cancelled(const CancelState& cancel, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    if (cancel.requested()) return false;
    int left = ms_until(until);
    if (left <= 0) return true;
    ::poll(nullptr, 0, std::min(left, kCancelPollMs));
  }
}

// connect_unix, tried again while the socket is absent, until retry_ms have passed since the
// first attempt (backing off from kFirstRetryDelayMs to kMaxRetryDelayMs between attempts).
Outcome connect_with_retry(const std::string& path, const CancelState& cancel, int retry_ms, int* out_fd) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(std::max(retry_ms, 0));
  int delay_ms = kFirstRetryDelayMs;
  for (int attempts = 1;; ++attempts) {
    if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
    bool absent = false;
    Outcome o = connect_unix(path, cancel, out_fd, &absent);
    if (o.ok() || !absent) return o;
    const int left = ms_until(deadline);
    if (left <= 0) {
      if (attempts > 1) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        o.message += " (tried " + std::to_string(attempts) + " times in " + std::to_string(waited) + " ms)";
      }
      return o;
    }
    if (!sleep_unless_cancelled(cancel, std::min(delay_ms, left))) {
      return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
    }
    delay_ms = std::min(delay_ms * 2, kMaxRetryDelayMs);
  }
}

// A connected socket as Beast's SyncReadStream and SyncWriteStream. Each read or write first
// waits in poll(2), for at most timeout_ms (0: no limit), so that a daemon that sends nothing
// for that long gives asio::error::timed_out; cancel() shuts the socket down, which ends
// that wait at once. Counts the bytes received, which tells a request the daemon never began
// to answer from one it did.
class SocketStream {
 public:
  SocketStream(int fd, int timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}

  size_t received_bytes() const { return received_bytes_; }

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, error_code& ec) {
    ec = {};
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
      asio::mutable_buffer b(*it);
      if (b.size() == 0) continue;
      for (;;) {
        if (!wait(POLLIN, ec)) return 0;
        ssize_t n = ::recv(fd_, b.data(), b.size(), MSG_DONTWAIT);
        if (n > 0) {
          received_bytes_ += static_cast<size_t>(n);
          return static_cast<size_t>(n);
        }
        if (n == 0) {
          ec = asio::error::eof;
          return 0;
        }
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
          ec.assign(errno, boost::system::system_category());
          return 0;
        }
      }
    }
    return 0;
  }

  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, error_code& ec) {
    ec = {};
    iovec iov[16];
    size_t n_iov = 0;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers) && n_iov < 16; ++it) {
      asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      iov[n_iov++] = {const_cast<void*>(b.data()), b.size()};
    }
    if (n_iov == 0) return 0;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    for (;;) {
      if (!wait(POLLOUT, ec)) return 0;
      ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        ec.assign(errno, boost::system::system_category());
        return 0;
      }
    }
  }

  // The throwing forms the stream concepts also ask for (Beast's sync algorithms with an
  // error_code, which are all we call, never use them).
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  // Until fd is ready for events, hung up or failed (true: the next call says which), or
  // timeout_ms pass (false, timed_out).
  bool wait(short events, error_code& ec) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    for (;;) {
      int wait_ms = -1;
      if (timeout_ms_ > 0) {
        wait_ms = ms_until(deadline);
        if (wait_ms <= 0) {
          ec = asio::error::timed_out;
          return false;
        }
      }
      pollfd p{fd_, events, 0};
      int r = ::poll(&p, 1, wait_ms);
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) {
        ec.assign(errno, boost::system::system_category());
        return false;
      }
    }
  }

  int fd_;
  int timeout_ms_;
  size_t received_bytes_ = 0;
};

// The daemon closed the connection (or reset it): the failure a kept connection shows when
// the daemon dropped it before the request arrived.
bool closed_by_peer(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::not_connected;
}

// A failed read or write: cancelled when cancel() shut the socket down, a timeout when the
// daemon sent nothing for timeout_ms, a protocol error when Beast could not parse what came,
// an I/O error otherwise.
Outcome io_failure(const CancelState& cancel, const error_code& ec, const char* what, int timeout_ms) {
  if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
  if (ec == asio::error::timed_out) {
    return Outcome::failure(HEARTH_ERR_TIMEOUT,
                            "the daemon sent nothing for " + std::to_string(timeout_ms) + " ms while " + what);
  }
  if (ec == http::error::partial_message || closed_by_peer(ec)) {
    return Outcome::failure(HEARTH_ERR_IO, std::string("the daemon closed the connection while ") + what);
  }
  if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    return Outcome::failure(HEARTH_ERR_PROTOCOL, std::string("malformed HTTP response (") + ec.message() + ")");
  }
  return Outcome::failure(HEARTH_ERR_IO, std::string("I/O error while ") + what + ": " + ec.message());
}

// An idle kept connection the daemon has closed (or that has bytes nobody asked for) reads
// as ready at once; a usable one has nothing to say.
bool idle_connection_usable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace

size_t max_socket_path_bytes() {
  return sizeof(sockaddr_un::sun_path) - 1;
}

void Transport::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Outcome Transport::exchange(const std::string& socket_path, CancelState& cancel, const HttpRequest& request,
                            ResponseSink& sink) {
  for (;;) {
    if (fd_ >= 0 && !idle_connection_usable(fd_)) disconnect();
    const bool reused = fd_ >= 0;
    if (!reused) {
      if (Outcome o = connect_with_retry(socket_path, cancel, connect_retry_ms_, &fd_); !o.ok()) return o;
    }
    bool retry_fresh = false;
    Outcome o = exchange_once(cancel, request, sink, &retry_fresh);
    // A fresh connection's failure is the answer; a kept one that the daemon closed as the
    // request went out is replaced once (the next round connects, so it ends there).
    if (o.ok() || !reused || !retry_fresh) return o;
  }
}

Outcome Transport::exchange_once(CancelState& cancel, const HttpRequest& request, ResponseSink& sink,
                                 bool* retry_fresh) {
  *retry_fresh = false;
  bool keep = false;  // the response was read whole and the daemon keeps the connection open
  cancel.register_fd(fd_);
  // Whatever happens below, withdraw the descriptor from cancel() first; then close it
  // unless it is clean for the next exchange. A cancel that came after the response was
  // whole may still have shut it down: requested() says so once the descriptor is withdrawn.
  struct Release {
    Transport& transport;
    CancelState& cancel;
    const bool& keep;
    ~Release() {
      cancel.unregister_fd();
      if (!keep || cancel.requested()) transport.disconnect();
    }
  } release{*this, cancel, keep};
  if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");

  const http::verb verb = http::string_to_verb(request.method);
  if (verb == http::verb::unknown) return Outcome::failure(HEARTH_ERR_INTERNAL, "unknown HTTP method");
  http::request<http::string_body> req{verb, request.target, 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::user_agent, "libhearth-client/" HEARTH_CLIENT_VERSION);
  req.set(http::field::accept, request.expect_stream ? "text/event-stream" : "application/json");
  if (req.method() == http::verb::post || !request.body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = request.body;
  }
  req.keep_alive(true);
  req.prepare_payload();
  SocketStream stream(fd_, timeout_ms_);
  error_code ec;
  http::write(stream, req, ec);
  if (ec) {
    *retry_fresh = !cancel.requested() && closed_by_peer(ec);
    return io_failure(cancel, ec, "sending the request", timeout_ms_);
  }

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // Streams are unbounded; sinks bound what they keep. (Not boost::none: Boost 1.74 compares
  // a Content-Length with an empty optional as "over the limit".)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(stream, buffer, parser, ec);
  if (ec) {
    *retry_fresh = !cancel.requested() && stream.received_bytes() == 0 && closed_by_peer(ec);
    return io_failure(cancel, ec, "waiting for the response", timeout_ms_);
  }

  const auto& head = parser.get();
  std::string content_type(head[http::field::content_type]);
  if (Outcome o = sink.on_head(static_cast<int>(head.result_int()), content_type); !o.ok()) return o;

  char piece[kBodyPieceBytes];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return io_failure(cancel, ec, "reading the response", timeout_ms_);
    size_t n = sizeof(piece) - parser.get().body().size;
    if (n > 0) {
      if (Outcome o = sink.on_body(piece, n); !o.ok()) return o;
    }
    if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
  }
  // Bytes past the end of the response were never asked for: do not start the next
  // exchange after them.
  keep = parser.keep_alive() && buffer.size() == 0;
  return sink.on_end();
}

}  // namespace hearth::client
