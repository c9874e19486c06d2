// HTTP/1.1 exchanges with hearthd over its Unix socket, on one kept-alive connection.
// Boost.Beast stays behind this header.
//
// The connection of one exchange is kept for the next one when its response was read whole
// and the daemon did not ask to close it; a cancelled, timed-out or failed exchange closes
// it, so no exchange ever starts on a half-read connection. A kept connection the daemon has
// closed meanwhile (its idle timeout, its connection limit, a restart) is noticed before the
// request is sent, or, if it closes in between, by the write failing or the end of stream
// arriving before any byte of the response: then nothing of the request can have been
// processed and it is sent again, once, on a fresh connection.
#pragma once

#include <cstddef>
#include <string>

#include "cancel.h"
#include "outcome.h"

namespace hearth::client {

// Receives the response as it arrives. A non-OK Outcome from either call ends the exchange
// (the connection is closed, which the daemon sees as a disconnect) and is returned.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Once, when the status line and headers have arrived. content_type may be "".
  virtual Outcome on_head(int status, const std::string& content_type) = 0;
  // For each piece of the (de-chunked) body, as soon as it is read from the socket.
  virtual Outcome on_body(const char* data, size_t size) = 0;
  // Once, after the whole body has arrived.
  virtual Outcome on_end() = 0;
};

struct HttpRequest {
  const char* method = "GET";  // "GET", "POST" or "DELETE"
  std::string target;          // "/v1/models"
  std::string body;            // JSON for POST (and DELETE, when not empty); empty for GET
  bool expect_stream = false;  // sets "Accept: text/event-stream"
};

// Connecting: a missing socket file or no listener (ENOENT, ECONNREFUSED) is tried again,
// backing off, for connect_retry_ms (a daemon restarting), then gives HEARTH_ERR_NO_DAEMON; a
// listener whose backlog stays full for kConnectTimeoutMs gives HEARTH_ERR_IO.
// Reading: with timeout_ms > 0, no byte from the daemon for timeout_ms gives
// HEARTH_ERR_TIMEOUT (a non-streamed answer sends nothing until it is whole); 0 waits as
// long as generation takes. Cancel ends any wait, the connect retry's too.
// Errors: NO_DAEMON, IO, TIMEOUT, PROTOCOL (not HTTP), CANCELLED (cancel.requested()),
// NOMEM, INVALID_ARGUMENT (path too long for sockaddr_un), or whatever the sink returned.
class Transport {
 public:
  static constexpr int kConnectTimeoutMs = 5000;
  static constexpr int kDefaultConnectRetryMs = HEARTH_CONNECT_RETRY_DEFAULT_MS;

  Transport() = default;
  ~Transport() { disconnect(); }
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Settings for the exchanges that follow (the handle's thread only).
  void set_timeout_ms(int timeout_ms) { timeout_ms_ = timeout_ms; }
  void set_connect_retry_ms(int retry_ms) { connect_retry_ms_ = retry_ms; }

  Outcome exchange(const std::string& socket_path, CancelState& cancel, const HttpRequest& request, ResponseSink& sink);

  // Closes the kept connection, if any.
  void disconnect();

 private:
  // One exchange on fd_ (connected). *retry_fresh: the exchange failed in a way that proves
  // the daemon processed nothing of it (the write failed, or the stream ended before any
  // byte of the response), so it may be sent again on a fresh connection.
  Outcome exchange_once(CancelState& cancel, const HttpRequest& request, ResponseSink& sink, bool* retry_fresh);

  int fd_ = -1;  // the kept-alive connection; -1 when there is none
  int timeout_ms_ = 0;
  int connect_retry_ms_ = kDefaultConnectRetryMs;
};

// Largest sun_path a socket path may fill (without its terminating NUL).
size_t max_socket_path_bytes();

}  // namespace hearth::client
