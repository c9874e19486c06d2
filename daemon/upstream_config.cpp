#include "daemon/upstream_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/upstream_toml.h"

namespace hearth::daemon {
namespace {

constexpr size_t kMaxKeyBytes = 4096;

bool name_ok(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

// Where a setting's errors are reported: the table's source and the setting's name in it.
struct Where {
  const std::string& source;
  const UpstreamKeyName& key_name;
  std::string operator()(const char* key) const { return source + ": " + key_name(key); }
};

Status get_string(const toml::table& t, const char* key, const Where& where, std::string* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return {};
  if (!n->is_string()) return make_error(where(key) + " must be a string");
  *out = n->as_string()->get();
  return {};
}

Status get_int(const toml::table& t, const char* key, int64_t min, int64_t max, const Where& where, int32_t* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return {};
  if (!n->is_integer()) return make_error(where(key) + " must be an integer");
  const int64_t v = n->as_integer()->get();
  if (v < min || v > max)
    return make_error(where(key) + " = " + std::to_string(v) + " is out of range (" + std::to_string(min) + ".." +
                      std::to_string(max) + ")");
  *out = static_cast<int32_t>(v);
  return {};
}

Status get_models(const toml::table& t, const Where& where, std::vector<std::string>* out) {
  const toml::node* n = t.get("models");
  if (n == nullptr) return {};
  const toml::array* a = n->as_array();
  if (a == nullptr) return make_error(where("models") + " must be an array of strings");
  for (const toml::node& m : *a) {
    if (!m.is_string() || m.as_string()->get().empty())
      return make_error(where("models") + " must hold non-empty strings");
    out->push_back(m.as_string()->get());
  }
  return {};
}

const char* const kKeys[] = {"name",
                             "url",
                             "api_key_file",
                             "models",
                             "model_prefix",
                             "ca_file",
                             "connect_timeout",
                             "first_byte_timeout",
                             "idle_timeout",
                             "max_concurrency",
                             "discover_interval",
                             "fallback"};

Status check_keys(const toml::table& t, const std::string& source) {
  for (const auto& [key, node] : t) {
    bool known = false;
    for (const char* k : kKeys) known = known || key.str() == k;
    if (!known) return make_error(source + ": '" + std::string(key.str()) + "' is not an upstream setting");
  }
  return {};
}

}  // namespace

Status check_upstream_url(const std::string& url) {
  if (url.rfind("unix:/", 0) == 0) return url.size() > 6 ? Status{} : make_error("'" + url + "' names no socket");
  for (const char* scheme : {"http://", "https://"}) {
    const std::string s(scheme);
    if (url.rfind(s, 0) != 0) continue;
    const std::string rest = url.substr(s.size());
    if (rest.empty() || rest[0] == '/' || rest[0] == ':') return make_error("'" + url + "' names no host");
    if (rest.find('@') != std::string::npos)
      return make_error("'" + url + "': user names in URLs are not supported (use api_key_file)");
    return {};
  }
  return make_error("'" + url + "' is not http://HOST[:PORT], https://HOST[:PORT] or unix:/PATH");
}

std::string quoted_key(const std::string& key) {
  return "'" + key + "'";
}

Result<UpstreamConfig> parse_upstream(const toml::table& t, const std::string& source,
                                      const UpstreamKeyName& key_name) {
  UpstreamConfig u;
  if (Status s = check_keys(t, source); !s) return s.error();
  const Where w{source, key_name};
  for (Status s : {get_string(t, "name", w, &u.name), get_string(t, "url", w, &u.url),
                   get_string(t, "api_key_file", w, &u.api_key_file), get_string(t, "model_prefix", w, &u.model_prefix),
                   get_string(t, "ca_file", w, &u.ca_file), get_string(t, "fallback", w, &u.fallback),
                   get_models(t, w, &u.models), get_int(t, "connect_timeout", 1, 3600, w, &u.connect_timeout_s),
                   get_int(t, "first_byte_timeout", 1, 86400, w, &u.first_byte_timeout_s),
                   get_int(t, "idle_timeout", 1, 86400, w, &u.idle_timeout_s),
                   get_int(t, "max_concurrency", 1, 4096, w, &u.max_concurrency),
                   get_int(t, "discover_interval", 1, 86400, w, &u.discover_interval_s)}) {
    if (!s) return s.error();
  }
  if (!name_ok(u.name)) return make_error(w("name") + " must be 1..64 of A-Z a-z 0-9 . _ - (got '" + u.name + "')");
  const std::string named = source + " (" + u.name + ")";
  const Where nw{named, key_name};
  if (u.url.empty()) return make_error(nw("url") + " is required");
  if (Status s = check_upstream_url(u.url); !s) return make_error(nw("url") + ": " + s.error().message);
  if (!u.ca_file.empty() && u.url.rfind("https://", 0) != 0)
    return make_error(nw("ca_file") + " is for an https:// url");
  return u;
}

Result<std::string> read_api_key(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return make_error("api_key_file " + path + ": " + std::strerror(errno));
  struct stat st {};
  std::string key;
  Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = make_error("api_key_file " + path + " is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    status = make_error("api_key_file " + path + " has mode " + mode +
                        ": its group or others may read it; make it private (chmod 600 " + path + ")");
  } else if (st.st_size > static_cast<off_t>(kMaxKeyBytes)) {
    status = make_error("api_key_file " + path + " is over " + std::to_string(kMaxKeyBytes) + " bytes");
  } else {
    key.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, key.data(), key.size());
    if (n < 0) status = make_error("api_key_file " + path + ": " + std::strerror(errno));
    key.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  ::close(fd);
  if (!status) return status.error();
  key.erase(0, key.find_first_not_of(" \t\r\n"));
  key.erase(key.find_last_not_of(" \t\r\n") + 1);
  if (key.empty()) return make_error("api_key_file " + path + " holds no key");
  for (unsigned char c : key)
    if (c < 0x20 || c > 0x7e) return make_error("api_key_file " + path + " holds a character a header cannot carry");
  return key;
}

}  // namespace hearth::daemon
