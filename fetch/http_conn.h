// Internal to fetch/http.cpp: one client connection and the pool of idle ones kept for reuse
// (HTTP/1.1 keep-alive to upstreams). Not for other rooms: it names Asio and Beast types.
//
// Why each connection owns an io_context: Asio binds a socket (and an ssl::stream, with its
// SSL* and the buffers around it) to the io_context it was made on, and a TLS stream cannot be
// moved to another one. So a Connection is the io_context, the TLS context and the stream
// together; an exchange runs it on the calling thread (io.run()), exactly as it ran a private
// io_context before, and afterwards, if the connection is clean, the whole object goes back to
// the pool. Plain TCP, Unix sockets and TLS are reused the same way, and a reused TLS
// connection skips the handshake and the certificate check entirely (they were done when it
// was opened; the same CA file is part of the pool key). The price: an idle connection holds
// its io_context's descriptors (epoll, eventfd, timerfd) besides the socket, which the idle
// caps bound.
//
// Thread-safety: the pool's map is guarded by a mutex; a Connection taken from it belongs to
// one thread until it is put back (or destroyed), so its io_context is only ever run by one
// thread at a time. No thread runs an idle connection's io_context: nothing is pending on it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace hearth::fetch::detail {

using UnixStream = boost::beast::basic_stream<boost::asio::local::stream_protocol>;
using TcpStream = boost::beast::tcp_stream;
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
using Clock = std::chrono::steady_clock;

// One connection and the io_context it lives on. Exactly one of the streams is set once
// connected. Members are destroyed in reverse order: streams, then the TLS context, then the
// io_context (which then frees any coroutine still waiting on it).
struct Connection {
  boost::asio::io_context io{1};
  std::unique_ptr<boost::asio::ssl::context> tls_context;
  std::unique_ptr<UnixStream> unix_stream;
  std::unique_ptr<TcpStream> tcp;
  std::unique_ptr<TlsStream> tls;
  bool reused = false;             // taken from the pool (it carried an earlier exchange)
  Clock::time_point idle_until{};  // while idle: closed from this time on

  bool connected() const { return unix_stream || tcp || tls; }
  int native_socket();  // -1 when not connected
  // Whether an idle connection still looks usable: the peer has not closed it (no EOF or
  // error waiting) and, for plain HTTP, sent nothing unasked. Never blocks.
  bool looks_alive();
};

// Idle connections by place (scheme, host, port, Unix socket path, CA file). Bounded: per
// place by the caller's max_idle, in all by kMaxIdleTotal; a connection idle longer than the
// idle limit it was put with is closed on the next take() or put() of any place (no thread
// watches the pool, so until then it only holds its descriptors).
class ConnectionPool {
 public:
  static constexpr size_t kMaxIdleTotal = 64;
  static ConnectionPool& instance();

  // The most recently used idle connection to key that still looks alive; null when none.
  std::unique_ptr<Connection> take(const std::string& key);
  // Keeps c idle for key for idle_limit, unless the place already has max_idle idle
  // connections or the pool is full (then c is closed).
  void put(const std::string& key, std::unique_ptr<Connection> c, size_t max_idle,
           std::chrono::milliseconds idle_limit);
  void drop(const std::string& key);  // closes every idle connection to key
  void clear();
  size_t idle() const;

 private:
  void prune_locked(Clock::time_point now);

  mutable std::mutex mutex_;
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> idle_;  // newest at the back
};

}  // namespace hearth::fetch::detail
