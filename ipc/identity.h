// Who is on the other end of a connection, as the kernel tells it (SO_PEERCRED on the Unix
// socket), and what that means for the prompt cache: the scope a request's KV is keyed by,
// and whose entries GET and DELETE /api/cache show and remove. Connections over the TCP
// listener have no kernel identity; they share one identity of their own ("tcp").
// docs/security.md is the model this implements.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/scheduler/request.h"
#include "ipc/options.h"

namespace hearth::ipc {

struct PeerIdentity {
  bool tcp = false;    // the TCP listener's single identity
  bool known = false;  // SO_PEERCRED answered (always, on Linux AF_UNIX)
  uint32_t uid = 0, gid = 0;
  int32_t pid = 0;
};

// SO_PEERCRED of a connected Unix stream socket; known = false when it fails.
PeerIdentity unix_peer(int fd);
PeerIdentity tcp_peer();

// The uid a request's cache entries are charged to: the peer's uid, kTcpOwner over TCP,
// and (uid_t)-1 when the kernel did not say.
uint32_t cache_owner(const PeerIdentity& peer);

// The scope of a request: by mode, the peer's uid ("uid:N"), its primary gid ("gid:N") or
// "shared" (TCP: "tcp" unless shared), then narrowed by a cache_salt ("\nsalt:<salt>").
CacheScope cache_scope(const PeerIdentity& peer, CacheScopeMode mode, const std::optional<std::string>& salt);

// Root (uid 0) or the daemon's own effective uid over the Unix socket: sees and clears
// every user's entries.
bool is_cache_admin(const PeerIdentity& peer);

// "uid 1000 (pid 42)" or "tcp", for logs. Never the scope key (a salt is a secret).
std::string peer_name(const PeerIdentity& peer);

// "user", "group", "shared"; parse_scope_mode is its inverse (nullopt for anything else).
const char* scope_mode_name(CacheScopeMode mode);
std::optional<CacheScopeMode> parse_scope_mode(std::string_view name);

// Browsers: whether an Origin header value is in the allowlist (exact, case-insensitive
// match of scheme://host[:port]; "*" allows any).
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

// The headers a response to an allowed Origin carries (Access-Control-Allow-Origin, Vary).
std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin);

// A cache_salt is 1..256 bytes of printable ASCII (0x20..0x7e); the error message otherwise.
std::optional<std::string> cache_salt_error(std::string_view salt);
inline constexpr size_t kMaxCacheSaltBytes = 256;

}  // namespace hearth::ipc
