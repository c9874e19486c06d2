#include "ipc/socket_path.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "common/log.h"

namespace hearth::ipc {

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

}  // namespace

Status clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return make_error("cannot stat " + path + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(st.st_mode)) return make_error(path + " exists and is not a socket; not replacing it");
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return make_error("socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket(): " + errno_text(errno));
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  // EAGAIN: a listener whose backlog is full is still a live listener.
  if (rc == 0 || err == EAGAIN) return make_error("another hearthd is already listening on " + path);
  if (err != ECONNREFUSED) return make_error("cannot check the existing socket " + path + ": " + errno_text(err));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return make_error("cannot remove the stale socket " + path + ": " + errno_text(errno));
  }
  LOG_INFO("ipc: replaced the stale socket " + path);
  return {};
}

Result<gid_t> lookup_group(const std::string& group) {
  const long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
  struct group gr {};
  struct group* found = nullptr;
  int rc;
  while ((rc = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0) return make_error("cannot look up group '" + group + "': " + errno_text(rc));
  if (found != nullptr) return found->gr_gid;
  // A number that names no group is taken as a gid, as chgrp does.
  gid_t gid = 0;
  const auto [end, ec] = std::from_chars(group.data(), group.data() + group.size(), gid);
  if (!group.empty() && ec == std::errc() && end == group.data() + group.size()) return gid;
  return make_error("group '" + group + "' does not exist");
}

Status set_socket_permissions(const std::string& path, unsigned mode, int64_t gid) {
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return make_error("cannot chmod " + path + ": " + errno_text(errno));
  }
  if (gid >= 0 && ::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) != 0) {
    return make_error("cannot chgrp " + path + ": " + errno_text(errno));
  }
  return {};
}

Result<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return make_error("cannot stat " + path + ": " + errno_text(errno));
  return FileId{st.st_dev, st.st_ino};
}

void unlink_if_same(const std::string& path, const FileId& id) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (st.st_dev != id.dev || st.st_ino != id.ino) return;
  ::unlink(path.c_str());
}

Result<HostPort> parse_host_port(const std::string& text) {
  HostPort hp;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return make_error("expected [ADDRESS]:PORT, got '" + text + "'");
    }
    hp.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      return make_error("expected HOST:PORT, got '" + text + "'");
    }
    hp.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (hp.host.empty()) return make_error("no host in '" + text + "'");
  if (hp.host == "localhost") hp.host = "127.0.0.1";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535) {
    return make_error("bad port in '" + text + "'");
  }
  hp.port = static_cast<uint16_t>(std::stoul(port));
  return hp;
}

Status check_listening_socket(int fd, int family) {
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0) {
    return make_error("fd " + std::to_string(fd) + " is not a socket: " + errno_text(errno));
  }
  const bool family_ok = family == 0 ? (value == AF_INET || value == AF_INET6) : value == family;
  if (!family_ok) return make_error("fd " + std::to_string(fd) + " is a socket of another address family");
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != SOCK_STREAM) {
    return make_error("fd " + std::to_string(fd) + " is not a stream socket");
  }
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value == 0) {
    return make_error("fd " + std::to_string(fd) + " is not listening");
  }
  return {};
}

}  // namespace hearth::ipc
