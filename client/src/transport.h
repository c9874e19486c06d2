// One HTTP/1.1 exchange with hearthd over its Unix socket. Boost.Asio and Beast stay behind
// this header.
//
// Each exchange opens its own connection (connecting to a local socket costs microseconds),
// so a cancelled or failed request never leaves a half-read connection behind.
#pragma once

#include <cstddef>
#include <memory>
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

// Connecting fails fast: a missing socket file or no listener gives HEARTH_ERR_NO_DAEMON at
// once, and a listener whose backlog stays full for kConnectTimeoutMs gives HEARTH_ERR_IO.
// There is no read timeout (generation takes as long as it takes); cancel ends any wait.
// Errors: NO_DAEMON, IO, PROTOCOL (not HTTP), CANCELLED (cancel.requested()), NOMEM,
// INVALID_ARGUMENT (path too long for sockaddr_un), or whatever the sink returned.
class Transport {
 public:
  static constexpr int kConnectTimeoutMs = 5000;

  Transport();
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  Outcome exchange(const std::string& socket_path, CancelState& cancel, const HttpRequest& request, ResponseSink& sink);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Largest sun_path a socket path may fill (without its terminating NUL).
size_t max_socket_path_bytes();

}  // namespace hearth::client
