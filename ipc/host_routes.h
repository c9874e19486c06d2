// The routes of a daemon that serves several models (ipc/model_host.h; docs/protocol.md,
// "Models"): /v1/models and /v1/models/<id> list every model the host knows, loaded or
// not; GET /api/ps the loaded ones; POST /api/load and /api/unload load or unload one by
// name before anyone asks. And engine_for, which picks the engine a request's body names.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "ipc/routes.h"

namespace hearth::ipc {

// The engine a request runs on: with a host, the model its "model" names (absent: the
// default) when loaded, else a ModelLoad for it, or a 404 naming an unknown model; without
// a host, ctx.engine. A "model" that is not a string is left to parse_openai_request.
using EngineChoice = std::variant<std::shared_ptr<const EngineRef>, RouteResult>;
EngineChoice engine_for(const RouteContext& ctx, const nlohmann::json& body);

// 404 model_not_found for a name the host does not serve.
ApiError unknown_model(std::string_view name);
// A route that names no model serves the host's default one: a ModelLoad for it (the
// caller found it not loaded), or 503 no_model when the host has none.
RouteResult load_default_model(const ModelHost& host);

HttpResponse hosted_models_response(ModelHost& host);
HttpResponse hosted_model_response(ModelHost& host, std::string_view id);
HttpResponse ps_response(ModelHost& host);
// POST /api/load {"model", "keep_alive"}: an EngineCall (loading blocks) answering when the
// model is loaded. POST /api/unload {"model"}: answered at once; the model goes when its
// requests have ended.
RouteResult load_route(ModelHost& host, const std::string& body);
HttpResponse unload_route(ModelHost& host, const std::string& body);

// The JSON of the one model a server without a host serves (/v1/models).
nlohmann::json model_object(const ModelInfo& m);
// The JSON of one model for /v1/models (OpenAI's object, hearth's details under "meta").
nlohmann::json hosted_model_object(const HostedModel& m, const EngineRef* engine);

}  // namespace hearth::ipc
