// hearth's HTTP/1.1 server (Boost.Beast over Boost.Asio), on Unix sockets and optionally
// on loopback TCP, serving the models of a ModelHost. Its routes are one table
// (route_table.cpp): OpenAI-compatible /v1/chat/completions, /v1/completions, /v1/models;
// /health, /metrics, /api/tokenize, /api/detokenize; /api/cache and /api/cache/warm (the
// prompt cache); /api/models, /api/ps, /api/load, /api/unload (the models). Asio and Beast stay behind this header
// (pimpl): the daemon sees listeners and a lifecycle, nothing else.
//
// Thread-safety: every member may be called from any thread; run() blocks the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "ipc/model_host.h"
#include "ipc/model_puller.h"
#include "ipc/options.h"
#include "ipc/upstream.h"

namespace hearth::ipc {

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Listeners. listen_unix binds path (the parent directory must exist), chmod's it to
  // mode, and chgrp's it to group when group is not empty. A path that is a socket with
  // no live listener (a crash's leftover) is replaced; a live one gives an error naming
  // it ("another hearthd is already listening on ..."); any other file there is an error
  // and is left alone. adopt_* take over descriptors passed by systemd (already bound and
  // listening). listen_tcp binds HOST:PORT; unless allow_remote, HOST must be a loopback
  // address, and requests whose Host header is not a loopback name or address get 403.
  Status listen_unix(const std::string& path, unsigned mode = 0600, const std::string& group = "");
  Status adopt_unix_fd(int fd);
  Status adopt_tcp_fd(int fd, bool allow_remote);
  Status listen_tcp(const std::string& host_port, bool allow_remote);

  // Serves the models of a host by name (ipc/model_host.h). Until then /health and every
  // route that needs a model answer 503 ("loading"); from then on /health answers 200 while
  // the host can serve a model.
  void set_host(std::shared_ptr<ModelHost> host);
  // Downloads models for POST /api/pull (ipc/model_puller.h); without one it answers 501.
  void set_puller(std::shared_ptr<ModelPuller> puller);
  // Models served by other engines (ipc/upstream.h); without it there are none.
  void set_upstreams(std::shared_ptr<UpstreamForwarder> upstreams);

  // Serves on io_threads threads until stop(). Returns when they have all finished.
  void run();
  // Closes the listeners and unlinks the Unix socket files this server created; open
  // connections go on; new generation requests get 503 ("shutting down").
  void stop_accepting();
  // Ends run(): closes every connection.
  void stop();

  // Counters the daemon's own logic may want (also on /metrics).
  int64_t open_connections() const;
  // Of those, how many wait for a request (a keep-alive pause or a header not yet whole).
  int64_t idle_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::ipc
