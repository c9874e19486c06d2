// One upstream given by hearthd's flags and environment variables instead of an [[upstream]]
// table (issue 45): each key of the table (upstream_config.h) is a flag --upstream-KEY
// ('_' -> '-': --upstream-api-key-file) and a variable HEARTH_UPSTREAM_KEY (upper case:
// HEARTH_UPSTREAM_API_KEY_FILE). A flag wins over its variable key by key; the values are
// checked as the file's are, and an error names the flag or variable that gave the value.
//   --upstream-models a,b      the list, comma-separated
//   --upstream-name            default: the URL's host (unix: the socket's file name)
// An API key itself is never read from either (others can read a process's command line and
// environment): only api_key_file, whose mode is checked when the daemon starts.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/upstream_config.h"

namespace hearth::daemon {

// One key of an [[upstream]] table as a flag: its --help placeholder and text.
struct UpstreamFlag {
  const char* key;         // the TOML key: "api_key_file"
  const char* value_name;  // "FILE"
  const char* help;
};
const std::vector<UpstreamFlag>& upstream_flags();

std::string upstream_flag_name(const std::string& key);  // "--upstream-api-key-file"
std::string upstream_env_name(const std::string& key);   // "HEARTH_UPSTREAM_API_KEY_FILE"

// A value and what gave it: "option --upstream-url", "environment variable HEARTH_UPSTREAM_URL".
struct UpstreamText {
  std::string text;
  std::string source;
};

// The upstream the texts describe (key -> text, both sources merged already); nullopt when
// there are none.
Result<std::optional<UpstreamConfig>> upstream_from_texts(const std::map<std::string, UpstreamText>& texts);

// The name an upstream gets from its URL when none is given: the host ("gpu.example",
// "127.0.0.1"), or a unix: socket's file name, with characters a name cannot hold as '-'.
std::string upstream_name_of_url(const std::string& url);

}  // namespace hearth::daemon
