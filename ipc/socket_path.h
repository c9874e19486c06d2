// The file-system side of a Unix socket listener, and TCP address parsing. Plain POSIX,
// no Asio: what listen_unix and listen_tcp check before and after binding.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hearth::ipc {

// Makes path free for bind(): nothing there -> ok; a socket nobody listens on (connect()
// is refused: a crashed daemon's leftover) -> unlinked; a socket with a live listener ->
// "another hearthd is already listening on PATH"; anything else -> an error, left alone.
Status clear_stale_socket(const std::string& path);

// The group's id (a name, or a number that names no group: that gid); an error otherwise.
Result<gid_t> lookup_group(const std::string& group);

// chmod(path, mode) and, when gid >= 0, chown(path, -1, gid).
Status set_socket_permissions(const std::string& path, unsigned mode, int64_t gid);

// A file's identity, to unlink at stop only the socket we made (not whatever replaced it).
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
};
Result<FileId> file_id(const std::string& path);
// Unlinks path when it is still the file id names.
void unlink_if_same(const std::string& path, const FileId& id);

struct HostPort {
  std::string host;  // without brackets; "localhost" resolved to "127.0.0.1"
  uint16_t port = 0;
};
// "HOST:PORT" or "[V6]:PORT".
Result<HostPort> parse_host_port(const std::string& text);

// Checks that fd is a listening stream socket of the given family (AF_UNIX, AF_INET,
// AF_INET6; family 0: AF_INET or AF_INET6), as systemd passes them.
Status check_listening_socket(int fd, int family);

}  // namespace hearth::ipc
