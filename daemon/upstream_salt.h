// The cache_salt hearthd sends an upstream for a caller (issue 45): HMAC-SHA256 of the
// caller's cache scope (CacheScope::key: "uid:1000", with the client's own salt folded in
// as "\nsalt:<salt>") under a secret that only hearthd holds, in lower-case hex. The same
// caller gets the same salt across restarts (the secret is kept in a file), different
// callers get unrelated ones, and no uid can be read back from a salt.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth::daemon {

// HMAC-SHA256(secret, scope_key) as 64 lower-case hex digits.
std::string derive_cache_salt(std::string_view secret, std::string_view scope_key);

// The secret in path: read when the file exists (it must be a private regular file, mode
// 0600 or 0400, of 64 hex digits), else 32 random bytes written there in hex, mode 0600,
// created exclusively. An error says what is wrong with the file; the secret never appears.
Result<std::string> load_or_create_salt_secret(const std::string& path);

}  // namespace hearth::daemon
