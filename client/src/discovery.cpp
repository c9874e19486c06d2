#include "discovery.h"

#include <sys/stat.h>

#include <cstdlib>

namespace hearth::client {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

std::string discover_socket_path() {
  if (std::string explicit_path = env("HEARTH_SOCKET"); !explicit_path.empty()) return explicit_path;
  std::string user_path;
  if (std::string runtime = env("XDG_RUNTIME_DIR"); !runtime.empty()) {
    user_path = runtime + "/hearth/hearth.sock";
    if (exists(user_path)) return user_path;
  }
  if (exists(kSystemSocketPath)) return kSystemSocketPath;
  return user_path.empty() ? std::string(kSystemSocketPath) : user_path;
}

}  // namespace hearth::client
