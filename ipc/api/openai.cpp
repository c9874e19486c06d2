#include "ipc/api/openai.h"

#include <nlohmann/json.hpp>

#include "ipc/api/hearth.h"
#include "ipc/api/openai_request.h"
#include "ipc/api/openai_response.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

RouteResult generation(Endpoint endpoint, const Call& call) {
  const EngineRef& engine = *call.engine;
  std::variant<OpenAiRequest, ApiError> parsed =
      parse_openai_request(endpoint, call.body, engine.model.id, engine.model.aliases);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  const OpenAiRequest& req = std::get<OpenAiRequest>(parsed);
  ResponseMeta meta = new_response_meta(endpoint, engine.model.id, req.stream && req.include_usage);
  meta.logprobs = req.top_logprobs >= 0;
  meta.continuous_usage = req.continuous_usage;
  meta.fallback_from = call.request.fallback_from;
  meta.fallback_reason = call.request.fallback_reason;
  std::string log_id = meta.id;
  std::variant<GenerationJob, ApiError> job =
      make_job(call, req, openai_writer(std::move(meta), req.stream), std::move(log_id));
  if (auto* e = std::get_if<ApiError>(&job)) return error_response(*e);
  GenerationJob& made = std::get<GenerationJob>(job);
  made.writer->prompt_counted(static_cast<int32_t>(made.request.prompt.size()));
  return std::move(made);
}

// The loaded fields of a model's /v1/models object.
json loaded_meta(const ModelInfo& m) {
  return json{{"arch", m.arch},
              {"backend", m.backend},
              {"n_ctx", m.n_ctx},
              {"chat_template", chat_family_name(m.chat_template.family)},
              {"aliases", m.aliases}};
}

}  // namespace

RouteResult openai_chat(const Call& call) {
  return generation(Endpoint::Chat, call);
}

RouteResult openai_completions(const Call& call) {
  return generation(Endpoint::Completions, call);
}

json model_object(const HostedModel& m, const EngineRef* engine) {
  json j{{"id", m.id},
         {"object", "model"},
         {"created", engine ? engine->model.created : m.created},
         {"owned_by", "hearth"},
         {"meta", engine ? loaded_meta(engine->model) : json::object()}};
  json& meta = j["meta"];
  meta["aliases"] = m.aliases;
  meta["loaded"] = engine != nullptr;
  meta["available"] = m.available;
  meta["file_bytes"] = m.file_bytes;
  if (!m.arch.empty()) meta["arch"] = m.arch;
  if (!m.quantization.empty()) meta["quantization"] = m.quantization;
  // The loaded engine's, else what a listing of the file read.
  meta["sampling_defaults"] = sampling_defaults_json(engine ? engine->model.sampling : m.sampling);
  if (!m.available) meta["error"] = m.reason;
  return j;
}

// A model an upstream serves: owned_by names the upstream, meta says where it runs.
json upstream_model_object(const UpstreamModel& m) {
  json meta{
      {"upstream", m.upstream}, {"url", m.url}, {"remote_id", m.remote_id}, {"loaded", true}, {"available", true}};
  if (!m.fallback.empty()) meta["fallback"] = m.fallback;
  return json{{"id", m.id},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "upstream:" + m.upstream},
              {"meta", std::move(meta)}};
}

RouteResult openai_models(const Call& call) {
  ModelHost& host = *call.ctx.host;
  json data = json::array();
  for (const HostedModel& m : host.models()) {
    const std::shared_ptr<const EngineRef> engine = m.loaded ? host.loaded(m.id) : nullptr;
    data.push_back(model_object(m, engine.get()));
  }
  if (call.ctx.upstreams)
    for (const UpstreamModel& m : call.ctx.upstreams->models()) data.push_back(upstream_model_object(m));
  return json_response(200, json{{"object", "list"}, {"data", data}});
}

RouteResult openai_model(const Call& call) {
  ModelHost& host = *call.ctx.host;
  const std::optional<std::string> id = host.resolve(call.tail);
  if (id) {
    for (const HostedModel& m : host.models()) {
      if (m.id != *id) continue;
      const std::shared_ptr<const EngineRef> engine = m.loaded ? host.loaded(m.id) : nullptr;
      return json_response(200, model_object(m, engine.get()));
    }
  }
  if (call.ctx.upstreams) {
    if (std::optional<UpstreamModel> m = call.ctx.upstreams->find(call.tail))
      return json_response(200, upstream_model_object(*m));
  }
  return error_response(unknown_model(call.tail));
}

}  // namespace hearth::ipc
