// Helpers shared by tests: where the test models are, where the source tree is.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hearth::test {

// Gemma 3 270M (gemma-3-270m-q4_k_m.gguf, what the model tests are written against), or ""
// when it is not installed (tests that need it then SKIP;
// scripts/test always fetches it, so in CI they run).
inline std::string gemma_model_path() {
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
