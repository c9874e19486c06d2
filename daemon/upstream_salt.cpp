#include "daemon/upstream_salt.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hearth::daemon {
namespace {

constexpr size_t kSecretBytes = 32;

std::string hex(const unsigned char* p, size_t n) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

bool is_hex_secret(const std::string& s) {
  if (s.size() != 2 * kSecretBytes) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<std::string> read_secret(const std::string& path, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(path + " is not a regular file");
  if ((st.st_mode & 077) != 0)
    return make_error(path + " may be read by its group or others; make it private (chmod 600 " + path + ")");
  std::string s(2 * kSecretBytes + 2, '\0');
  const ssize_t n = ::read(fd, s.data(), s.size());
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (!is_hex_secret(s)) return make_error(path + " does not hold a hearth cache-salt secret (64 hex digits)");
  return s;
}

}  // namespace

std::string derive_cache_salt(std::string_view secret, std::string_view scope_key) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(scope_key.data()), scope_key.size(), mac, &len);
  return hex(mac, len);
}

Result<std::string> load_or_create_salt_secret(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    Result<std::string> s = read_secret(path, fd);
    ::close(fd);
    return s;
  }
  if (errno != ENOENT) return make_error("cannot open " + path + ": " + std::strerror(errno));
  unsigned char raw[kSecretBytes];
  if (RAND_bytes(raw, sizeof raw) != 1) return make_error("cannot draw random bytes for " + path);
  const std::string secret = hex(raw, sizeof raw);
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == EEXIST) return load_or_create_salt_secret(path);  // another hearthd made it just now
  if (fd < 0) return make_error("cannot create " + path + ": " + std::strerror(errno));
  const std::string text = secret + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return make_error("cannot write " + path);
  }
  return secret;
}

}  // namespace hearth::daemon
