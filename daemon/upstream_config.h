// The engines hearthd forwards some models to (issue 45): one [[upstream]] table of the
// config file each. Parsing is pure, as the rest of config.h; read_api_key reads the key
// file when the daemon starts.
//
//   [[upstream]]
//   name = "gpu-box"                       # [A-Za-z0-9._-], 1..64
//   url = "https://gpu.example:8000"       # or http://host:port, or unix:/path/to.sock
//   api_key_file = "/etc/hearth/gpu.key"   # sent as Bearer; mode 0600 or 0400
//   models = ["Qwen/Qwen3-32B"]            # absent: GET /v1/models at start and on a timer
//   model_prefix = "gpu/"                  # hearth's clients name them "gpu/Qwen/Qwen3-32B"
//   ca_file = "/etc/hearth/gpu-ca.pem"     # absent: the system's CAs
//   connect_timeout = 10                   # seconds: connecting, TLS, sending the request
//   first_byte_timeout = 300               # seconds: request sent -> the answer's header
//   idle_timeout = 120                     # seconds between two pieces of the answer
//   max_concurrency = 16                   # requests in flight to it at once
//   fallback = "gemma3:270m"               # a local model that answers when it cannot
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace hearth::daemon {

struct UpstreamConfig {
  std::string name;
  std::string url;                  // http://host[:port][/base], https://..., unix:/path
  std::string api_key_file;         // "" = no key
  std::vector<std::string> models;  // the upstream's own names; empty = discovered
  std::string model_prefix;         // prepended to each name in hearth's listings and requests
  std::string ca_file;              // "" = the system's CA certificates
  int32_t connect_timeout_s = 10;
  int32_t first_byte_timeout_s = 300;
  int32_t idle_timeout_s = 120;
  int32_t max_concurrency = 16;
  int32_t discover_interval_s = 300;  // seconds between two GET /v1/models when models is empty
  std::string fallback;               // a local model's name; "" = none
};

// Whether url is one an upstream can have; the error says what is wrong.
Status check_upstream_url(const std::string& url);

// The API key in path (whitespace around it dropped): an error when the file cannot be read,
// is empty or over 4 KiB, or is readable or writable by its group or others (the message
// says to chmod 600). The key itself never appears in a message.
Result<std::string> read_api_key(const std::string& path);

}  // namespace hearth::daemon
