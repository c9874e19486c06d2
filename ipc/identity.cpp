#include "ipc/identity.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace hearth::ipc {

PeerIdentity unix_peer(int fd) {
  PeerIdentity p;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred) {
    p.known = true;
    p.uid = cred.uid;
    p.gid = cred.gid;
    p.pid = cred.pid;
  }
  return p;
}

PeerIdentity tcp_peer() {
  PeerIdentity p;
  p.tcp = true;
  return p;
}

uint32_t cache_owner(const PeerIdentity& peer) {
  if (peer.tcp) return kTcpOwner;
  return peer.known ? peer.uid : 0xffffffffu;
}

CacheScope cache_scope(const PeerIdentity& peer, CacheScopeMode mode, const std::optional<std::string>& salt) {
  CacheScope s;
  s.owner = cache_owner(peer);
  if (mode == CacheScopeMode::Shared) {
    s.key = "shared";
  } else if (peer.tcp) {
    s.key = "tcp";
  } else if (!peer.known) {
    s.key = "unknown-peer";  // never happens on Linux; such peers share nothing with anyone known
  } else if (mode == CacheScopeMode::Group) {
    s.key = "gid:" + std::to_string(peer.gid);
  } else {
    s.key = "uid:" + std::to_string(peer.uid);
  }
  if (salt) s.key += "\nsalt:" + *salt;
  return s;
}

bool is_cache_admin(const PeerIdentity& peer) {
  return !peer.tcp && peer.known && (peer.uid == 0 || peer.uid == ::geteuid());
}

std::string peer_name(const PeerIdentity& peer) {
  if (peer.tcp) return "tcp";
  if (!peer.known) return "unknown peer";
  return "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")";
}

const char* scope_mode_name(CacheScopeMode mode) {
  switch (mode) {
    case CacheScopeMode::User:
      return "user";
    case CacheScopeMode::Group:
      return "group";
    case CacheScopeMode::Shared:
      return "shared";
  }
  return "user";
}

std::optional<CacheScopeMode> parse_scope_mode(std::string_view name) {
  if (name == "user") return CacheScopeMode::User;
  if (name == "group") return CacheScopeMode::Group;
  if (name == "shared") return CacheScopeMode::Shared;
  return std::nullopt;
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
  };
  const std::string o = lower(origin);
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return a == "*" || lower(a) == o; });
}

std::optional<std::string> cache_salt_error(std::string_view salt) {
  const bool printable = std::all_of(salt.begin(), salt.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  if (salt.empty() || salt.size() > kMaxCacheSaltBytes || !printable) {
    return "'cache_salt' must be a non-empty string of at most " + std::to_string(kMaxCacheSaltBytes) +
           " printable ASCII characters (got " + std::to_string(salt.size()) + " bytes" +
           (printable ? "" : ", with control or non-ASCII bytes") + ")";
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) {
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

}  // namespace hearth::ipc
