#include "engine/model/model_path.h"

#include <cstdlib>
#include <filesystem>

#include "engine/model/catalog.h"

namespace hearth {

std::string models_dir() {
  if (const char* m = std::getenv("HEARTH_MODELS"); m && *m) return m;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/hearth/models";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/hearth/models";
}

namespace {

Result<std::string> installed(const CatalogModel& m, const std::string& dir, bool is_default) {
  const std::string p = dir + "/" + m.file;
  if (std::filesystem::is_regular_file(p)) return p;
  const bool first = &m == &default_catalog_model();
  return make_error(std::string(is_default ? "the default model " : "the model ") + m.name + " is not installed (" + p +
                    "); install it with: hearth-fetch-model" + (first ? "" : " " + m.name) + " (scripts/fetch-model" +
                    (first ? "" : " " + m.name) + " in a source tree)");
}

}  // namespace

Result<std::string> resolve_model(const std::string& arg) {
  namespace fs = std::filesystem;
  const std::string dir = models_dir();
  if (arg.empty()) return installed(default_catalog_model(), dir, true);
  if (fs::is_regular_file(arg)) return arg;
  if (const CatalogModel* m = find_catalog_model(arg)) return installed(*m, dir, false);
  for (const std::string& p : {dir + "/" + arg, dir + "/" + arg + ".gguf"})
    if (fs::is_regular_file(p)) return p;
  return make_error("no model '" + arg + "': not a file, not in " + dir + ", and not a known model name (" +
                    catalog_names() + ")");
}

}  // namespace hearth
