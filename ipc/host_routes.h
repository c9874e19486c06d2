// The routes of the models' host (ipc/model_host.h; docs/protocol.md, "Models"): GET /api/ps
// lists the loaded models; POST /api/load and /api/unload load or unload one by name before
// anyone asks.
#pragma once

#include "ipc/handler.h"

namespace hearth::ipc {

RouteResult list_loaded(const Call& call);
// {"model", "keep_alive"}: an EngineCall (loading blocks) answering when the model is loaded.
RouteResult load_model(const Call& call);
// {"model"}: answered at once; the model goes when its requests have ended.
RouteResult unload_model(const Call& call);

}  // namespace hearth::ipc
