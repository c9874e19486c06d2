// Helpers for the prompt cache tests: a temp directory, small KV formats and chunks with
// deterministic contents, a FileOps that fails on cue, and stderr capture for log lines.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/chunk_file.h"
#include "storage/chunk_store.h"
#include "tests/test_util.h"

namespace hearth::storage::test {

namespace fs = std::filesystem;

inline constexpr const char* kFingerprintA = "0123456789abcdef0123456789abcdef";
inline constexpr const char* kFingerprintB = "fedcba9876543210fedcba9876543210";

// 2 layers x (K + V) x 8 elements x 2 bytes = 64 bytes per token.
inline KvFormat small_format(const char* fingerprint = kFingerprintA, uint32_t dtype = 1) {
  KvFormat f;
  f.model_fingerprint = fingerprint;
  f.kv_dtype = dtype;
  f.n_layer = 2;
  f.kv_dim = 8;
  f.row_bytes = 16;  // 8 elements x 2 bytes
  return f;
}

inline std::vector<int32_t> chunk_tokens(uint64_t hash, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((hash * 31 + i * 7) % 262144);
  return t;
}

inline ChunkWrite make_chunk(uint64_t hash, uint64_t parent, const KvFormat& f, size_t n_tokens = 16) {
  ChunkWrite c;
  c.hash = hash;
  c.parent = parent;
  c.tokens = chunk_tokens(hash, n_tokens);
  c.payload.resize(n_tokens * f.bytes_per_token());
  uint64_t x = hash * 0x9E3779B97F4A7C15ull + 1;
  for (uint8_t& b : c.payload) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return c;
}

inline uint64_t file_bytes_of(const KvFormat& f, size_t n_tokens = 16) {
  return kChunkHeaderBytes + 4 * n_tokens + n_tokens * f.bytes_per_token();
}

inline std::unique_ptr<ChunkStore> open_store(const fs::path& dir, const KvFormat& f, uint64_t max_bytes = 1 << 30,
                                              std::shared_ptr<FileOps> ops = nullptr, size_t queue_max = 64) {
  StoreOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.queue_max = queue_max;
  o.file_ops = std::move(ops);
  auto s = ChunkStore::open(o, f);
  if (!s) return nullptr;
  return std::move(*s);
}

using hearth::test::eventually;
using hearth::test::kHangGuard;
using hearth::test::TempDir;

// Waits until the writer has nothing queued or in flight; false (with a message for the
// failing check that follows) after the hang guard.
inline bool wait_idle(ChunkStore& s) {
  if (eventually([&] { return s.stats().queue_depth == 0; })) return true;
  UNSCOPED_INFO("hang guard: the chunk writer still had "
                << s.stats().queue_depth << " chunks queued or in flight after " << kHangGuard.count() / 1000 << " s");
  return false;
}

inline std::string chunk_path(const fs::path& dir, uint64_t hash) {
  return (dir / "chunks" / chunk_relative_path(hash)).string();
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// Total size of the regular files under <dir>/chunks.
inline uint64_t chunk_dir_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "chunks", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// Fails chosen calls: the `fail_at`-th call of `op` (1-based), or every one from then on.
class FaultyFileOps : public FileOps {
 public:
  enum Op { kCreate, kWrite, kFsync, kRename, kPread, kUnlink, kMkdir, kCount };
  Op fail_op = kCount;
  int fail_at = 0;
  int fail_errno = EIO;
  bool sticky = false;  // keep failing after the first
  std::atomic<int> calls[kCount] = {};
  std::atomic<int> failures{0};
  // When set, write() waits until release() (to hold the writer thread mid-chunk).
  std::atomic<bool> gate{false};

  void release() {
    std::lock_guard lk(m_);
    gate = false;
    cv_.notify_all();
  }

  int open(const char* path, int flags, mode_t mode) override {
    if ((flags & O_CREAT) && hit(kCreate)) return fail();
    return FileOps::open(path, flags, mode);
  }
  ssize_t write(int fd, const void* data, size_t n) override {
    {
      std::unique_lock lk(m_);
      cv_.wait(lk, [&] { return !gate.load(); });
    }
    if (hit(kWrite)) return fail();
    return FileOps::write(fd, data, n);
  }
  ssize_t pread(int fd, void* data, size_t n, off_t off) override {
    if (hit(kPread)) return fail();
    return FileOps::pread(fd, data, n, off);
  }
  int fsync(int fd) override { return hit(kFsync) ? fail() : FileOps::fsync(fd); }
  int rename(const char* a, const char* b) override { return hit(kRename) ? fail() : FileOps::rename(a, b); }
  int unlink(const char* p) override { return hit(kUnlink) ? fail() : FileOps::unlink(p); }
  int mkdir(const char* p, mode_t m) override { return hit(kMkdir) ? fail() : FileOps::mkdir(p, m); }

 private:
  bool hit(Op op) {
    const int n = ++calls[op];
    return op == fail_op && (n == fail_at || (sticky && n > fail_at));
  }
  int fail() {
    ++failures;
    errno = fail_errno;
    return -1;
  }
  std::mutex m_;
  std::condition_variable cv_;
};

// Redirects fd 2 to a file while alive; text() returns what was written.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    char name[] = "/tmp/hearth-stderr-XXXXXX";
    fd_ = ::mkstemp(name);
    path_ = name;
    saved_ = ::dup(2);
    ::dup2(fd_, 2);
  }
  ~StderrCapture() {
    restore();
    ::unlink(path_.c_str());
  }
  std::string text() {
    restore();
    std::ifstream in(path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    ::close(fd_);
    saved_ = -1;
  }
  int fd_ = -1, saved_ = -1;
  std::string path_;
};

}  // namespace hearth::storage::test
