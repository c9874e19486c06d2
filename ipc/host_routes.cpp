#include "ipc/host_routes.h"

#include <nlohmann/json.hpp>

#include "ipc/openai.h"

namespace hearth::ipc {

using json = nlohmann::json;

namespace {

HttpResponse ok(const json& body) {
  HttpResponse r;
  r.body = dump_json(body);
  return r;
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

json ps_entry(const HostedModel& m) {
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
  return j;
}

}  // namespace

ApiError unknown_model(std::string_view name) {
  return not_found("The model '" + std::string(name) + "' does not exist; GET /v1/models lists the models served",
                   "model_not_found");
}

RouteResult load_default_model(const ModelHost& host) {
  const std::optional<std::string> id = host.resolve("");
  if (!id) return error_response(unavailable("no model can be served", "no_model"));
  return ModelLoad{*id};
}

EngineChoice engine_for(const RouteContext& ctx, const json& body) {
  if (ctx.host == nullptr) return ctx.engine;
  std::string name;
  if (const auto it = body.find("model"); it != body.end() && it->is_string()) name = it->get<std::string>();
  const std::optional<std::string> id = ctx.host->resolve(name);
  if (!id) return name.empty() ? load_default_model(*ctx.host) : RouteResult{error_response(unknown_model(name))};
  if (ctx.engine && ctx.engine->model.id == *id) return ctx.engine;
  std::shared_ptr<const EngineRef> engine = ctx.host->loaded(*id);
  if (!engine) return RouteResult{ModelLoad{*id}};
  return engine;
}

json hosted_model_object(const HostedModel& m, const EngineRef* engine) {
  json j = engine ? model_object(engine->model)
                  : json{{"id", m.id},
                         {"object", "model"},
                         {"created", m.created},
                         {"owned_by", "hearth"},
                         {"meta", json::object()}};
  json& meta = j["meta"];
  meta["aliases"] = m.aliases;
  meta["loaded"] = engine != nullptr;
  meta["available"] = m.available;
  meta["file_bytes"] = m.file_bytes;
  if (!m.arch.empty()) meta["arch"] = m.arch;
  if (!m.quantization.empty()) meta["quantization"] = m.quantization;
  if (!m.available) meta["error"] = m.reason;
  return j;
}

HttpResponse hosted_models_response(ModelHost& host) {
  json data = json::array();
  for (const HostedModel& m : host.models()) {
    const std::shared_ptr<const EngineRef> engine = m.loaded ? host.loaded(m.id) : nullptr;
    data.push_back(hosted_model_object(m, engine.get()));
  }
  return ok(json{{"object", "list"}, {"data", data}});
}

HttpResponse hosted_model_response(ModelHost& host, std::string_view name) {
  const std::optional<std::string> id = host.resolve(name);
  if (id && !name.empty()) {
    for (const HostedModel& m : host.models()) {
      if (m.id != *id) continue;
      const std::shared_ptr<const EngineRef> engine = m.loaded ? host.loaded(m.id) : nullptr;
      return ok(hosted_model_object(m, engine.get()));
    }
  }
  return error_response(unknown_model(name));
}

HttpResponse ps_response(ModelHost& host) {
  json models = json::array();
  for (const HostedModel& m : host.models())
    if (m.loaded) models.push_back(ps_entry(m));
  return ok(json{{"models", models}});
}

RouteResult load_route(ModelHost& host, const std::string& body) {
  json j;
  if (auto e = parse_json(body, &j)) return error_response(*e);
  std::variant<std::string, ApiError> id = named_model(host, j);
  if (auto* e = std::get_if<ApiError>(&id)) return error_response(*e);
  std::optional<KeepAlive> keep_alive;
  if (j.contains("keep_alive") && !j["keep_alive"].is_null()) {
    if (std::optional<ApiError> e = parse_keep_alive(j["keep_alive"], &keep_alive)) return error_response(*e);
  }
  EngineCall call;
  call.run = [&host, id = std::get<std::string>(id), keep_alive]() -> HttpResponse {
    std::variant<std::shared_ptr<const EngineRef>, ApiError> loaded = host.load(id);
    if (auto* e = std::get_if<ApiError>(&loaded)) return error_response(*e);
    host.request_ended(id, keep_alive);
    for (const HostedModel& m : host.models())
      if (m.id == id && m.loaded) return ok(json{{"loaded", true}, {"model", ps_entry(m)}});
    return ok(json{{"loaded", true}, {"model", {{"id", id}}}});
  };
  return call;
}

HttpResponse unload_route(ModelHost& host, const std::string& body) {
  json j;
  if (auto e = parse_json(body, &j)) return error_response(*e);
  std::variant<std::string, ApiError> id = named_model(host, j);
  if (auto* e = std::get_if<ApiError>(&id)) return error_response(*e);
  const bool was_loaded = host.unload(std::get<std::string>(id));
  return ok(json{{"model", std::get<std::string>(id)}, {"was_loaded", was_loaded}});
}

}  // namespace hearth::ipc
