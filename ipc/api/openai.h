// OpenAI's API (docs/protocol.md): the handlers the route table names for its paths.
//   POST /v1/chat/completions, /v1/completions: the body parsed into the internal request
//     (openai_request.h), answered by an OpenAI writer (openai_response.h);
//   GET /v1/models, /v1/models/<id>: every model the host knows, loaded or not.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "ipc/handler.h"

namespace hearth::ipc {

RouteResult openai_chat(const Call& call);
RouteResult openai_completions(const Call& call);
RouteResult openai_models(const Call& call);
RouteResult openai_model(const Call& call);

// The JSON of one model for /v1/models: OpenAI's object, hearth's details under "meta";
// engine is the model's when it is loaded.
nlohmann::ordered_json model_object(const HostedModel& m, const EngineRef* engine);

}  // namespace hearth::ipc
