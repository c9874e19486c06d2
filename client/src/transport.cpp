// HTTP/1.1 over a Unix socket with Boost.Beast, synchronously, with error codes only (no
// exception escapes: callers sit behind the C boundary).
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hearth::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;

constexpr size_t kBodyPieceBytes = 16 * 1024;  // one read's worth of body handed to the sink

std::string errno_text(int err) {
  return std::strerror(err);
}

// Connects a non-blocking AF_UNIX socket and returns it in blocking mode. A full backlog
// (EAGAIN) is retried until kConnectTimeoutMs; everything else fails at once.
Outcome connect_unix(const std::string& path, int* out_fd) {
  *out_fd = -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "socket path is empty or longer than " +
                                                             std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());

  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Outcome::failure(HEARTH_ERR_IO, "socket(): " + errno_text(errno));

  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(Transport::kConnectTimeoutMs);
  for (;;) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN && std::chrono::steady_clock::now() < deadline) {
      ::poll(nullptr, 0, 10);  // the listener's backlog is full: it is busy accepting
      continue;
    }
    ::close(fd);
    switch (err) {
      case ENOENT:
      case ENOTDIR:
        return Outcome::failure(HEARTH_ERR_NO_DAEMON, "no socket at " + path);
      case ECONNREFUSED:
        return Outcome::failure(HEARTH_ERR_NO_DAEMON, "nothing is listening on " + path);
      case EAGAIN:
        return Outcome::failure(HEARTH_ERR_IO, "the daemon on " + path + " accepts no connections (backlog full)");
      default:
        return Outcome::failure(HEARTH_ERR_IO, "cannot connect to " + path + ": " + errno_text(err));
    }
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    int err = errno;
    ::close(fd);
    return Outcome::failure(HEARTH_ERR_IO, "fcntl(): " + errno_text(err));
  }
  *out_fd = fd;
  return Outcome::success();
}

// A failed read or write: cancelled when cancel() shut the socket down, a protocol error when
// Beast could not parse what came, an I/O error otherwise.
Outcome io_failure(const CancelState& cancel, const boost::system::error_code& ec, const char* what) {
  if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    return Outcome::failure(HEARTH_ERR_IO, std::string("the daemon closed the connection while ") + what);
  }
  if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    return Outcome::failure(HEARTH_ERR_PROTOCOL, std::string("malformed HTTP response (") + ec.message() + ")");
  }
  return Outcome::failure(HEARTH_ERR_IO, std::string("I/O error while ") + what + ": " + ec.message());
}

}  // namespace

class Transport::Impl {
 public:
  asio::io_context io;  // never run: the socket only needs an executor for its sync calls
};

Transport::Transport() : impl_(std::make_unique<Impl>()) {}
Transport::~Transport() = default;

size_t max_socket_path_bytes() {
  return sizeof(sockaddr_un::sun_path) - 1;
}

Outcome Transport::exchange(const std::string& socket_path, CancelState& cancel, const HttpRequest& request,
                            ResponseSink& sink) {
  int fd = -1;
  Outcome connected = connect_unix(socket_path, &fd);
  if (!connected.ok()) return connected;

  Local::socket socket(impl_->io);
  boost::system::error_code ec;
  socket.assign(Local(), fd, ec);
  if (ec) {
    ::close(fd);
    return Outcome::failure(HEARTH_ERR_IO, "cannot adopt the socket: " + ec.message());
  }
  cancel.register_fd(fd);
  // Whatever happens below, withdraw the descriptor from cancel() before closing it.
  struct Closer {
    CancelState& cancel;
    Local::socket& socket;
    ~Closer() {
      cancel.unregister_fd();
      boost::system::error_code ignored;
      socket.close(ignored);
    }
  } closer{cancel, socket};
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
  req.keep_alive(false);  // one exchange per connection
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) return io_failure(cancel, ec, "sending the request");

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // Streams are unbounded; sinks bound what they keep. (Not boost::none: Boost 1.74 compares
  // a Content-Length with an empty optional as "over the limit".)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(socket, buffer, parser, ec);
  if (ec) return io_failure(cancel, ec, "waiting for the response");

  const auto& head = parser.get();
  std::string content_type(head[http::field::content_type]);
  if (Outcome o = sink.on_head(static_cast<int>(head.result_int()), content_type); !o.ok()) return o;

  char piece[kBodyPieceBytes];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    http::read_some(socket, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return io_failure(cancel, ec, "reading the response");
    size_t n = sizeof(piece) - parser.get().body().size;
    if (n > 0) {
      if (Outcome o = sink.on_body(piece, n); !o.ok()) return o;
    }
    if (cancel.requested()) return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled");
  }
  return sink.on_end();
}

}  // namespace hearth::client
