// model_fingerprint(): XXH3-128 of a weights file, remembered in the cache's index by
// (absolute path, size, mtime) so a restart does not read hundreds of MB again.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "storage/chunk_store.h"
#include "storage/index_db.h"

namespace hearth::storage {
namespace {

std::atomic<uint64_t> g_files_hashed{0};

int64_t mtime_ns(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

Result<std::string> hash_file(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open " + file.string() + ": " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  XXH3_state_t* state = XXH3_createState();
  if (!state) {
    ::close(fd);
    return make_error("out of memory");
  }
  XXH3_128bits_reset(state);
  constexpr size_t kBlock = size_t{8} << 20;  // big reads: the file is hundreds of MB
  std::vector<uint8_t> buf(kBlock);
  std::string error;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read " + file.string() + ": " + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    XXH3_128bits_update(state, buf.data(), static_cast<size_t>(n));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  ::close(fd);
  if (!error.empty()) return make_error(error);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);  // big-endian: high 64 bits first
  std::string hex;
  for (unsigned char b : canon.digest) {
    hex += "0123456789abcdef"[b >> 4];
    hex += "0123456789abcdef"[b & 15];
  }
  ++g_files_hashed;
  return hex;
}

std::unique_ptr<IndexDb> open_index(const std::filesystem::path& cache_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(cache_dir, ec)) {
    std::filesystem::create_directories(cache_dir, ec);
    if (ec) return nullptr;
    ::chmod(cache_dir.c_str(), 0700);
  }
  bool rebuilt = false;
  auto db = IndexDb::open(cache_dir / "index.sqlite", &rebuilt);
  if (rebuilt) LOG_WARN("prompt cache: the index in " + cache_dir.string() + " was unreadable; rebuilt it");
  if (!db) return nullptr;
  return std::move(*db);
}

}  // namespace

uint64_t model_fingerprint_files_hashed() {
  return g_files_hashed.load();
}

Result<std::string> model_fingerprint(const std::filesystem::path& cache_dir, const std::filesystem::path& model_file) {
  struct stat before {};
  if (::stat(model_file.c_str(), &before) != 0) {
    return make_error("cannot read model file " + model_file.string() + ": " + std::strerror(errno));
  }
  if (!S_ISREG(before.st_mode)) return make_error(model_file.string() + " is not a regular file");
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::weakly_canonical(std::filesystem::absolute(model_file, ec), ec);
  if (ec) abs = model_file;
  const uint64_t size = static_cast<uint64_t>(before.st_size);

  std::unique_ptr<IndexDb> db = cache_dir.empty() ? nullptr : open_index(cache_dir);
  if (db) {
    if (auto fp = db->remembered_fingerprint(abs.string(), size, mtime_ns(before))) return *fp;
  }
  auto fp = hash_file(model_file);
  if (!fp) return fp;
  // Remember it only if the file did not change while it was read.
  struct stat after {};
  if (db && ::stat(model_file.c_str(), &after) == 0 && static_cast<uint64_t>(after.st_size) == size &&
      mtime_ns(after) == mtime_ns(before)) {
    if (Status s = db->remember_fingerprint(abs.string(), size, mtime_ns(before), *fp); !s) {
      LOG_DEBUG("prompt cache: " + s.error().message);
    }
  }
  return fp;
}

}  // namespace hearth::storage
