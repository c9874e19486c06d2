// The server's configuration, as the daemon fills it from its own: limits, deadlines, who
// shares a prompt-cache scope, which browser origins the TCP listener serves. A value type
// the Server keeps and its routes read; nothing here does anything.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace hearth::ipc {

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
  // the loaded models.
  std::string models_dir;
};

}  // namespace hearth::ipc
