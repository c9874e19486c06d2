// hearth's own API (docs/protocol.md): the handlers the route table names for the paths
// that are hearth's, not another API's.
//   hearth.cpp         GET /health, GET /metrics, POST /api/tokenize, /api/detokenize
//   hearth_models.cpp  GET /api/models, POST /api/load, /api/unload; a model's /api/ps fields
//   hearth_cache.cpp   GET and DELETE /api/cache, POST /api/cache/warm (hearth_cache.h)
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "ipc/handler.h"

namespace hearth::ipc {

// 200 {"status": "ok"} while a model can be served and the server accepts requests; 503
// "loading" or "shutting_down" otherwise.
RouteResult health(const Call& call);
// The server's counters, the default model's engine (when loaded) and every model's series.
RouteResult metrics(const Call& call);
// {"content", "add_special", "parse_special"} -> {"tokens"}; {"tokens"} -> {"content"}.
RouteResult tokenize(const Call& call);
RouteResult detokenize(const Call& call);

// Every model file in the models folder (ctx.models_dir), with what hearth read from it and
// whether it can serve it, which ones are loaded, and the catalog's models with whether
// each is installed. Scans on the calling thread: each file is mapped and its header read,
// milliseconds per file. Answers while no model is loaded too.
RouteResult installed_models(const Call& call);
// hearth's fields of one loaded model, which GET /api/ps (ollama_ps) lists beside Ollama's:
// {"id", "aliases", "path", "backend", "memory_bytes", "device", "device_memory_bytes",
// "n_ctx", "in_flight", "idle_s", "loaded_at", "loads", "expires_in_s", "state"}; "state" is "loaded",
// or "unloading" from the start of its unload until its cache writes end and its memory is free.
nlohmann::ordered_json loaded_model_json(const HostedModel& m);
// A model's sampling defaults: {"source", "temperature", "top_k", "top_p", "min_p",
// "repetition_penalty", "penalty_last_n", "no_thinking": {...}}, each field only when the
// model sets it; {} when it sets none.
nlohmann::ordered_json sampling_defaults_json(const ModelSampling& m);
// {"model", "keep_alive"}: an EngineCall (loading blocks) answering when the model is loaded.
RouteResult load_model(const Call& call);
// {"model"}: answered at once; the model goes when its requests have ended.
RouteResult unload_model(const Call& call);

// The prompt cache (hearth_cache.h says more).
RouteResult cache_stats(const Call& call);
RouteResult cache_clear(const Call& call);
RouteResult cache_warm(const Call& call);

}  // namespace hearth::ipc
