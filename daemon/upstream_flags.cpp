#include "daemon/upstream_flags.h"

#include <cctype>
#include <charconv>

#include "common/split.h"
#include "daemon/upstream_toml.h"

namespace hearth::daemon {
namespace {

// What errors call the upstream of the flags and the environment.
constexpr const char* kSource = "the upstream of the flags and environment";

bool is_int_key(const std::string& key) {
  return key == "connect_timeout" || key == "first_byte_timeout" || key == "idle_timeout" || key == "max_concurrency" ||
         key == "discover_interval";
}

// "a, b,,c" -> ["a", "b", "c"] (split_list) as a TOML array.
toml::array model_list(const std::string& text) {
  toml::array out;
  for (std::string& item : split_list(text)) out.push_back(std::move(item));
  return out;
}

// The texts as the table a file would hold; an integer that is not one is an error here,
// naming its source (the ranges are parse_upstream's).
Result<toml::table> table_of(const std::map<std::string, UpstreamText>& texts) {
  toml::table t;
  for (const auto& [key, given] : texts) {
    if (key == "models") {
      t.insert(key, model_list(given.text));
    } else if (is_int_key(key)) {
      int64_t n = 0;
      const char* end = given.text.data() + given.text.size();
      auto [p, ec] = std::from_chars(given.text.data(), end, n);
      if (ec != std::errc() || p != end) return make_error(given.source + ": '" + given.text + "' is not an integer");
      t.insert(key, n);
    } else {
      t.insert(key, given.text);
    }
  }
  return t;
}

}  // namespace

const std::vector<UpstreamFlag>& upstream_flags() {
  // clang-format off
  static const std::vector<UpstreamFlag> kFlags = {
      {"url", "URL", "serve the models of the engine at http://HOST[:PORT], https://HOST[:PORT] or unix:/PATH"},
      {"name", "NAME", "the upstream's name in logs, errors, /health and /metrics (default: the URL's host)"},
      {"api_key_file", "FILE", "a file (mode 600 or 400) holding the API key sent as Bearer (never the key itself)"},
      {"models", "A,B", "its models, comma-separated (default: asked of its /v1/models at start and on a timer)"},
      {"model_prefix", "TEXT", "prepended to its models' names in hearth (\"gpu/\": gpu/Qwen/Qwen3-32B)"},
      {"ca_file", "FILE", "the CA certificates an https:// upstream is verified with (default: the system's)"},
      {"connect_timeout", "SECONDS", "seconds to connect, shake hands and send the request (default 10)"},
      {"first_byte_timeout", "SECONDS", "seconds from the request sent to the answer's header (default 300)"},
      {"idle_timeout", "SECONDS", "seconds between two pieces of an answer (default 120)"},
      {"max_concurrency", "N", "requests in flight to it at once (default 16)"},
      {"discover_interval", "SECONDS", "seconds between two GET /v1/models when no models are listed (default 300)"},
      {"fallback", "MODEL", "a local model that answers when the upstream cannot (default: none)"},
  };
  // clang-format on
  return kFlags;
}

std::string upstream_flag_name(const std::string& key) {
  std::string out = "--upstream-" + key;
  for (char& c : out)
    if (c == '_') c = '-';
  return out;
}

std::string upstream_env_name(const std::string& key) {
  std::string out = "HEARTH_UPSTREAM_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string upstream_name_of_url(const std::string& url) {
  std::string raw;
  if (url.rfind("unix:", 0) == 0) {
    raw = url.substr(url.find_last_of('/') + 1);
  } else if (const size_t scheme = url.find("://"); scheme != std::string::npos) {
    raw = url.substr(scheme + 3);
    raw = raw[0] == '[' ? raw.substr(1, raw.find(']') - 1) : raw.substr(0, raw.find_first_of(":/"));
  }
  std::string name;
  for (char c : raw) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (ok || (!name.empty() && name.back() != '-')) name += ok ? c : '-';
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.substr(0, 64);
}

Result<std::optional<UpstreamConfig>> upstream_from_texts(const std::map<std::string, UpstreamText>& texts) {
  if (texts.empty()) return std::optional<UpstreamConfig>();
  if (texts.count("url") == 0) {
    std::string given;
    for (const auto& [key, t] : texts) given += (given.empty() ? "" : ", ") + t.source;
    return make_error(std::string(kSource) + ": " + upstream_flag_name("url") + " (or " + upstream_env_name("url") +
                      ") is required (given: " + given + ")");
  }
  Result<toml::table> table = table_of(texts);
  if (!table) return table.error();
  if (texts.count("name") == 0) table->insert("name", upstream_name_of_url(texts.at("url").text));
  const UpstreamKeyName key_name = [&texts](const std::string& key) {
    auto it = texts.find(key);
    if (it != texts.end()) return it->second.source;
    return upstream_flag_name(key) + " (or " + upstream_env_name(key) + ")";
  };
  Result<UpstreamConfig> u = parse_upstream(*table, kSource, key_name);
  if (!u) return u.error();
  return std::optional<UpstreamConfig>(std::move(*u));
}

}  // namespace hearth::daemon
