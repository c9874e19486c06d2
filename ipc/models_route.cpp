#include "ipc/models_route.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/catalog.h"
#include "engine/model/installed.h"
#include "ipc/openai.h"

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

HttpResponse installed_models_response(const RouteContext& ctx) {
  const ModelInfo* served = ctx.engine ? &ctx.engine->model : nullptr;
  std::vector<InstalledModel> found;
  if (ctx.models_dir != nullptr && !ctx.models_dir->empty()) found = scan_models(*ctx.models_dir);
  json models = json::array();
  bool served_listed = false;
  std::vector<std::string> loaded_paths;  // with a host, every loaded model's file
  if (ctx.host != nullptr) {
    for (const HostedModel& h : ctx.host->models())
      if (h.loaded) loaded_paths.push_back(h.path);
  }
  for (const InstalledModel& m : found) {
    bool loaded = served != nullptr && same_file(m.path, served->path);
    for (const std::string& p : loaded_paths) loaded = loaded || same_file(m.path, p);
    served_listed = served_listed || loaded;
    models.push_back(model_json(m, loaded));
  }
  // A model given to hearthd by a path outside the folder is listed too.
  if (served != nullptr && !served_listed) models.push_back(model_json(inspect_model(served->path), true));
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
  HttpResponse r;
  r.body = dump_json(body);
  return r;
}

}  // namespace hearth::ipc
