// OpenAI's routes: POST /v1/chat/completions and /v1/completions (validated, rendered and
// tokenized into a GenerationJob), GET /v1/models and /v1/models/<id> (every model the host
// knows, loaded or not; hearth's details under "meta").
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
nlohmann::json model_object(const HostedModel& m, const EngineRef* engine);

}  // namespace hearth::ipc
