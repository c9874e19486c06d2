#include "ipc/api/ollama.h"

#include <nlohmann/json.hpp>

#include "ipc/api/ollama_request.h"
#include "ipc/api/ollama_response.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr ErrorShape kShape = ErrorShape::Ollama;

bool unloads(const std::optional<KeepAlive>& keep_alive) {
  return keep_alive && keep_alive->duration && keep_alive->duration->count() == 0;
}

// Nothing to generate: the model is loaded now (dispatch loaded it) and keeps the request's
// keep_alive, or with keep_alive 0 it goes once its requests have ended (it was loaded or
// not: Ollama answers "unload" either way).
HttpResponse load_answer(ModelHost& host, const std::string& id, const OllamaRequest& req, const std::string& name) {
  const bool unload = unloads(req.keep_alive);
  if (unload) {
    host.unload(id);
  } else {
    host.request_ended(id, req.keep_alive);
  }
  return json_response(200, ollama_load_answer(req.endpoint, name, unload ? "unload" : "load"));
}

// The refusals Ollama gives a model without a capability: 400 "\"name\" does not support X".
ApiError unsupported(const std::string& name, const char* capability) {
  return bad_request("\"" + name + "\" does not support " + capability, capability, "unsupported_capability");
}

RouteResult generation(OllamaEndpoint endpoint, const Call& call) {
  std::variant<OllamaRequest, ApiError> parsed = parse_ollama_request(endpoint, call.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e, kShape);
  const OllamaRequest& req = std::get<OllamaRequest>(parsed);
  ModelHost& host = *call.ctx.host;
  const std::optional<std::string> id = host.resolve(req.model);  // dispatch resolved this name already
  if (!id) return error_response(unknown_model(req.model), kShape);
  const std::string name = req.model.empty() ? *id : req.model;
  if (req.load_only) return load_answer(host, *id, req, name);
  if (!call.engine) return error_response(internal_error("the model was not loaded for this request"), kShape);
  const bool thinks = chat_family_thinks(call.engine->model.chat_template.family);
  if (req.think.value_or(false) && !thinks) return error_response(unsupported(name, "thinking"), kShape);
  if (!req.tools.empty() && !ollama_model_calls_tools(call.engine->model.chat_template))
    return error_response(unsupported(name, "tools"), kShape);
  OllamaMeta meta;
  meta.endpoint = endpoint;
  meta.model = name;
  meta.load_wait = call.load_wait;
  meta.logprobs = req.logprobs;
  OllamaRequest thinking = req;
  thinking.chat_options.enable_thinking = req.think.value_or(true);
  std::variant<GenerationJob, ApiError> job =
      make_job(call, thinking, ollama_writer(std::move(meta), req.stream), random_id("ollama-"));
  if (auto* e = std::get_if<ApiError>(&job)) return error_response(*e, kShape);
  return std::move(std::get<GenerationJob>(job));
}

}  // namespace

RouteResult ollama_chat(const Call& call) {
  return generation(OllamaEndpoint::Chat, call);
}

RouteResult ollama_generate(const Call& call) {
  return generation(OllamaEndpoint::Generate, call);
}

bool ollama_model_calls_tools(const ChatTemplate& chat_template) {
  return chat_template.tool_syntax != ToolSyntax::None;
}

}  // namespace hearth::ipc
