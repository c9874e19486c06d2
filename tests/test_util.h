// Helpers shared by tests: where the test models are, where the source tree is.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

namespace hearth::test {

// True in the AddressSanitizer build (-DHEARTH_SANITIZE=ON), where code runs 3-10x slower:
// the slowest model-level tests run a subset there and the full set in the Release build,
// which CI runs too. Each such test says which subset.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// How long a test waits for something that must happen (a request to finish, a daemon to
// become ready, a connection to close) before it calls it a hang and fails, saying what it
// waited for. A hang guard, not a performance bound: it fires only when the thing will never
// happen, so it is minutes, far past what a slow machine needs (CI: 2 cores, ctest -j2, half
// of the run under ASan+UBSan at 3-10x, other processes beside it). It stays under ctest's
// per-test --timeout (900 s in scripts/test) so that the test's message, not ctest's kill,
// reports a hang early in a test. No test asserts that anything happens within a time.
inline constexpr std::chrono::milliseconds kHangGuard = std::chrono::minutes(10);

// Polls cond every 5 ms until it holds (true) or `guard` passes (false).
template <class F>
bool eventually(F cond, std::chrono::milliseconds guard = kHangGuard) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The models folder: $HEARTH_MODELS, else $XDG_DATA_HOME/hearth/models, else
// ~/.local/share/hearth/models.
inline std::string models_dir() {
  std::string dir;
  if (const char* m = std::getenv("HEARTH_MODELS"); m && *m) {
    dir = m;
  } else if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) {
    dir = std::string(x) + "/hearth/models";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.local/share/hearth/models";
  }
  return dir;
}

// `file_name` in the models folder, or "" when it is not installed.
inline std::string installed_model_path(const std::string& file_name) {
  std::string path = models_dir() + "/" + file_name;
  return std::filesystem::exists(path) ? path : std::string();
}

// Gemma 3 270M (gemma-3-270m-q4_k_m.gguf, what most model tests are written against), or ""
// when it is not installed (tests that need it then SKIP; scripts/test always fetches it,
// so in CI they run).
inline std::string gemma_model_path() {
  if (const char* p = std::getenv("HEARTH_TEST_MODEL"); p && *p) return p;
  return installed_model_path("gemma-3-270m-q4_k_m.gguf");
}

// A fresh private directory (mode 0700) under /tmp, removed with everything in it when the
// object goes, also what a test made unreadable (its directories get their rights back
// first). /tmp rather than $TMPDIR: a Unix socket path holds ~107 bytes. The one temporary
// directory of every test folder.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "hearth-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path_ = tmpl;
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    ::chmod(path_.c_str(), 0700);
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
    }
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // dir/name, as a string.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string source_dir() {
  if (const char* p = std::getenv("HEARTH_SOURCE_DIR"); p && *p) return p;
  return ".";
}

}  // namespace hearth::test
