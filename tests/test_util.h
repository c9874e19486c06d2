// Helpers shared by tests: where the default model is, where the source tree is.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hearth::test {

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

// The default model file, or "" when it is not installed (tests that need it then SKIP;
// scripts/test always fetches it first, so in CI they run).
inline std::string default_model_path() {
  if (const char* p = std::getenv("HEARTH_TEST_MODEL"); p && *p) return p;
  return installed_model_path("gemma-3-270m-q4_k_m.gguf");
}

// Whether this build runs under AddressSanitizer (CI's second pass): tests on real models
// then do a short subset of their work.
inline constexpr bool kUnderSanitizer =
#if defined(__SANITIZE_ADDRESS__)
    true;
#else
    false;
#endif

inline std::string source_dir() {
  if (const char* p = std::getenv("HEARTH_SOURCE_DIR"); p && *p) return p;
  return ".";
}

}  // namespace hearth::test
