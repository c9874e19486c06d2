// The [[upstream]] tables of the config file (upstream_config.h), for config.cpp: toml++
// stays out of the header everyone else includes.
#pragma once

#include <toml++/toml.h>

#include <functional>
#include <string>

#include "daemon/upstream_config.h"

namespace hearth::daemon {

// How an error names a setting: in a file its key ("'max_concurrency'"); for the upstream of
// the flags and environment, the flag or variable that gave it (upstream_flags.h).
using UpstreamKeyName = std::function<std::string(const std::string& key)>;
std::string quoted_key(const std::string& key);

// One [[upstream]] table; source names it in errors ("config file /x.toml: [[upstream]] #2"),
// key_name each setting.
Result<UpstreamConfig> parse_upstream(const toml::table& table, const std::string& source,
                                      const UpstreamKeyName& key_name = quoted_key);

}  // namespace hearth::daemon
