#include "ipc/models_route.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/catalog.h"
#include "engine/model/installed.h"

namespace hearth::ipc {

namespace {

using json = nlohmann::json;

json model_json(const InstalledModel& m, bool loaded) {
  json j{{"id", m.id},
         {"file", m.file},
         {"bytes", m.bytes},
         {"modified", m.modified},
         {"catalog", !m.catalog_name.empty()},
         {"available", m.usable},
         {"loaded", loaded}};
  if (!m.arch.empty()) j["architecture"] = m.arch;
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.quantization.empty()) j["quantization"] = m.quantization;
  if (m.parameters > 0) j["parameters"] = m.parameters;
  if (m.context_length > 0) j["context_length"] = m.context_length;
  if (!m.usable) j["error"] = m.error;
  return j;
}

}  // namespace

RouteResult installed_models(const Call& call) {
  const RouteContext& ctx = call.ctx;
  std::vector<InstalledModel> found;
  if (ctx.models_dir != nullptr && !ctx.models_dir->empty()) found = scan_models(*ctx.models_dir);
  std::vector<std::string> loaded_paths;  // every loaded model's file
  if (ctx.host != nullptr) {
    for (const HostedModel& h : ctx.host->models())
      if (h.loaded) loaded_paths.push_back(h.path);
  }
  json models = json::array();
  std::vector<bool> listed(loaded_paths.size(), false);
  for (const InstalledModel& m : found) {
    bool loaded = false;
    for (size_t i = 0; i < loaded_paths.size(); ++i) {
      if (!same_file(m.path, loaded_paths[i])) continue;
      loaded = true;
      listed[i] = true;
    }
    models.push_back(model_json(m, loaded));
  }
  // A model given to hearthd by a path outside the folder is listed too.
  for (size_t i = 0; i < loaded_paths.size(); ++i)
    if (!listed[i]) models.push_back(model_json(inspect_model(loaded_paths[i]), true));
  json catalog_models = json::array();
  for (const CatalogModel& c : catalog()) {
    bool installed = false;
    for (const InstalledModel& m : found) installed = installed || m.catalog_name == c.name;
    catalog_models.push_back({{"name", c.name},
                              {"file", c.file},
                              {"bytes", c.bytes},
                              {"license", c.license},
                              {"about", c.about},
                              {"installed", installed}});
  }
  json body{{"models", models}, {"catalog", catalog_models}};
  if (ctx.models_dir != nullptr) body["dir"] = *ctx.models_dir;
  return json_response(200, body);
}

}  // namespace hearth::ipc
