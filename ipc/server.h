// hearth's HTTP/1.1 server (Boost.Beast over Boost.Asio), on Unix sockets and optionally
// on loopback TCP. Routes: OpenAI-compatible /v1/chat/completions, /v1/completions,
// /v1/models; /health, /metrics, /api/tokenize, /api/detokenize; /api/cache and
// /api/cache/warm (the prompt cache). Asio and Beast stay behind this header (pimpl): the
// daemon sees listeners and a lifecycle, nothing else.
//
// Thread-safety: every member may be called from any thread; run() blocks the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/tokenizer/chat_template.h"

namespace hearth {
class Scheduler;
class Tokenizer;
}  // namespace hearth

namespace hearth::ipc {

class ModelHost;

// What /v1/models and the responses' "model" field report.
struct ModelInfo {
  std::string id;                                 // the catalog's name ("qwen2.5-coder:0.5b"), else the file's
  std::vector<std::string> aliases;               // its other names: the file name without ".gguf"
  std::string path;                               // the weights file
  std::string arch;                               // general.architecture
  std::string backend;                            // "cpu", "vulkan", "cuda"
  int32_t n_ctx = 0;                              // tokens per sequence
  int64_t created = 0;                            // unix seconds (the file's mtime)
  ChatTemplate chat_template{ChatFamily::Gemma};  // how /v1/chat/completions renders messages

  // Whether a request's "model" (or /v1/models/<name>) names this model: its id or an alias.
  bool answers_to(std::string_view name) const {
    if (name == id) return true;
    for (const std::string& a : aliases)
      if (name == a) return true;
    return false;
  }
};

// Whose prompts share a prompt-cache scope (docs/security.md): each user's own (the
// default), a group's (the peer's primary gid), or everyone's (an explicit choice, e.g. a
// kiosk). A request's cache_salt narrows any of them further.
enum class CacheScopeMode { User, Group, Shared };

struct ServerOptions {
  size_t body_limit_bytes = 8u << 20;                // larger bodies: 413
  std::chrono::milliseconds header_timeout{10'000};  // request line + headers must arrive within this
  std::chrono::milliseconds body_timeout{60'000};    // the body, after the headers
  std::chrono::milliseconds idle_timeout{120'000};   // keep-alive: between requests
  // A response the client reads nothing of for this long (its socket buffer full: a client
  // that stopped reading) is cut off: the connection closes and its generation is cancelled,
  // freeing the sequence and its KV blocks.
  std::chrono::milliseconds write_timeout{60'000};
  // At the limit a new connection replaces the one that has waited longest for a request;
  // when every connection is serving one, the new one gets 503 with Retry-After.
  size_t max_connections = 256;
  int io_threads = 1;
  CacheScopeMode cache_scope = CacheScopeMode::User;
  // Origins (scheme://host[:port]) whose browser requests the TCP listener serves, with
  // CORS headers; a request from any other Origin gets 403. Empty: no web page at all.
  std::vector<std::string> allowed_origins;
  // The folder GET /api/models lists (engine/model/model_path.h models_dir()); "" lists only
  // the loaded model.
  std::string models_dir;
};

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

  // Until set_engine, /health and the generation routes answer 503 ("loading").
  // The pointers must stay valid until run() has returned.
  void set_engine(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model);
  // Serves the models of a host by name (ipc/model_host.h) instead: from then on /health
  // answers 200 while the host can serve a model. The host must outlive run().
  void set_host(std::shared_ptr<ModelHost> host);

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
