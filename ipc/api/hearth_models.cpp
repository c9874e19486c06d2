// hearth's model routes (docs/protocol.md, "Several models" and "Installed models"):
// GET /api/models (the files on the disk), POST /api/load and /api/unload, and the hearth
// fields of each loaded model that GET /api/ps (api/ollama.h) lists.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/catalog.h"
#include "engine/model/installed.h"
#include "ipc/api/hearth.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

HttpResponse ok(const json& body) {
  return json_response(200, body);
}

// The "model" of a load or unload request: a string naming a model the host knows.
std::variant<std::string, ApiError> named_model(ModelHost& host, const json& body) {
  const auto it = body.find("model");
  if (it == body.end() || it->is_null())
    return bad_request("'model' (the name of a model) is required", "model", "missing_required_parameter");
  if (!it->is_string()) return bad_request("'model' must be a string", "model");
  const std::optional<std::string> id = host.resolve(it->get_ref<const std::string&>());
  if (!id) return unknown_model(it->get_ref<const std::string&>());
  return *id;
}

json defaults_fields(const SamplingDefaults& d) {
  json j = json::object();
  // Six significant digits, as the float was written: 0.7, not 0.699999988079071.
  auto num = [&j](const char* name, const std::optional<float>& v) {
    if (!v) return;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(*v));
    j[name] = std::strtod(buf, nullptr);
  };
  num("temperature", d.temperature);
  if (d.top_k) j["top_k"] = *d.top_k;
  num("top_p", d.top_p);
  num("min_p", d.min_p);
  num("repetition_penalty", d.repetition_penalty);
  if (d.penalty_last_n) j["penalty_last_n"] = *d.penalty_last_n;
  return j;
}

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
  j["sampling_defaults"] = sampling_defaults_json(m.sampling);
  if (!m.usable) j["error"] = m.error;
  return j;
}

}  // namespace

json sampling_defaults_json(const ModelSampling& m) {
  if (m.defaults.empty()) return json::object();
  json j{{"source", m.source}};
  j.update(defaults_fields(m.defaults));
  if (m.no_thinking) j["no_thinking"] = defaults_fields(*m.no_thinking);
  return j;
}

json loaded_model_json(const HostedModel& m) {
  json j{{"id", m.id},
         {"aliases", m.aliases},
         {"path", m.path},
         {"backend", m.backend},
         {"memory_bytes", m.memory_bytes},
         {"device", m.device},
         {"device_memory_bytes", m.device_memory_bytes},
         {"n_ctx", m.n_ctx},
         {"in_flight", m.in_flight},
         {"idle_s", m.idle_s},
         {"loaded_at", m.loaded_at},
         {"loads", m.loads},
         {"expires_in_s", nullptr}};
  if (m.expires_in_s) j["expires_in_s"] = *m.expires_in_s;
  j["state"] = m.unloading ? "unloading" : "loaded";
  return j;
}

RouteResult load_model(const Call& call) {
  ModelHost& host = *call.ctx.host;
  const json& j = call.body;
  std::variant<std::string, ApiError> id = named_model(host, j);
  if (auto* e = std::get_if<ApiError>(&id)) return error_response(*e);
  std::optional<KeepAlive> keep_alive;
  if (const auto it = j.find("keep_alive"); it != j.end() && !it->is_null()) {
    if (std::optional<ApiError> e = parse_keep_alive(*it, &keep_alive)) return error_response(*e);
  }
  EngineCall load_call;
  load_call.run = [&host, id = std::get<std::string>(id), keep_alive]() -> HttpResponse {
    ModelHost::Loaded loaded = host.load(id);
    if (auto* e = std::get_if<HostError>(&loaded)) return error_response(host_error(*e));
    host.request_ended(id, keep_alive);
    for (const HostedModel& m : host.models())
      if (m.id == id && m.loaded) return ok(json{{"loaded", true}, {"model", loaded_model_json(m)}});
    return ok(json{{"loaded", true}, {"model", {{"id", id}}}});
  };
  return load_call;
}

RouteResult unload_model(const Call& call) {
  ModelHost& host = *call.ctx.host;
  std::variant<std::string, ApiError> id = named_model(host, call.body);
  if (auto* e = std::get_if<ApiError>(&id)) return error_response(*e);
  const bool was_loaded = host.unload(std::get<std::string>(id));
  return ok(json{{"model", std::get<std::string>(id)}, {"was_loaded", was_loaded}});
}

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
  if (ctx.upstreams) {
    json up = json::array();
    for (const UpstreamModel& m : ctx.upstreams->models())
      up.push_back({{"id", m.id}, {"upstream", m.upstream}, {"url", m.url}, {"remote_id", m.remote_id}});
    body["upstream_models"] = std::move(up);
  }
  if (ctx.models_dir != nullptr) body["dir"] = *ctx.models_dir;
  return json_response(200, body);
}

}  // namespace hearth::ipc
