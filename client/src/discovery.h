// Where the daemon's socket is, when the caller does not say (see hearth_client_open).
#pragma once

#include <string>

namespace hearth::client {

// 1. $HEARTH_SOCKET (not empty); 2. $XDG_RUNTIME_DIR/hearth/hearth.sock if it exists;
// 3. /run/hearth/hearth.sock if it exists; 4. the path of 2, or of 3 without XDG_RUNTIME_DIR.
// Reads the environment: not thread-safe against a concurrent setenv().
std::string discover_socket_path();

inline constexpr const char* kSystemSocketPath = "/run/hearth/hearth.sock";

}  // namespace hearth::client
