// Helpers shared by tests: where the default model is, where the source tree is.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hearth::test {

// True in the AddressSanitizer build (-DHEARTH_SANITIZE=ON), where code runs 3-10x slower:
// the slowest model-level tests run a subset there and the full set in the Release build,
// which CI runs too. Each such test says which subset.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The default model file, or "" when it is not installed (tests that need it then SKIP;
// scripts/test always fetches it first, so in CI they run).
inline std::string default_model_path() {
  if (const char* p = std::getenv("HEARTH_TEST_MODEL"); p && *p) return p;
  std::string dir;
  if (const char* m = std::getenv("HEARTH_MODELS"); m && *m) {
    dir = m;
  } else if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) {
    dir = std::string(x) + "/hearth/models";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.local/share/hearth/models";
  }
  std::string path = dir + "/gemma-3-270m-q4_k_m.gguf";
  return std::filesystem::exists(path) ? path : std::string();
}

inline std::string source_dir() {
  if (const char* p = std::getenv("HEARTH_SOURCE_DIR"); p && *p) return p;
  return ".";
}

}  // namespace hearth::test
