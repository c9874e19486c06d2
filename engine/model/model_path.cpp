#include "engine/model/model_path.h"

#include <cstdlib>
#include <filesystem>

namespace hearth {

std::string models_dir() {
  if (const char* m = std::getenv("HEARTH_MODELS"); m && *m) return m;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/hearth/models";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/hearth/models";
}

Result<std::string> resolve_model(const std::string& arg) {
  namespace fs = std::filesystem;
  const std::string dir = models_dir();
  if (arg.empty()) {
    const std::string p = dir + "/" + kDefaultModelFile;
    if (fs::exists(p)) return p;
    return make_error("the default model is not installed (" + p + "); run scripts/fetch-model");
  }
  if (fs::is_regular_file(arg)) return arg;
  for (const std::string& p : {dir + "/" + arg, dir + "/" + arg + ".gguf"})
    if (fs::is_regular_file(p)) return p;
  return make_error("no model '" + arg + "': not a file, and not in " + dir);
}

}  // namespace hearth
