// The [[upstream]] tables of the config file (upstream_config.h), for config.cpp: toml++
// stays out of the header everyone else includes.
#pragma once

#include <toml++/toml.h>

#include <string>

#include "daemon/upstream_config.h"

namespace hearth::daemon {

// One [[upstream]] table; source names it in errors ("config file /x.toml: [[upstream]] #2").
Result<UpstreamConfig> parse_upstream(const toml::table& table, const std::string& source);

}  // namespace hearth::daemon
