// GET /api/models (docs/protocol.md, "Installed models"): every model file in the models
// folder, with what hearth read from it and whether it can serve it, which one is loaded,
// and the catalog's models with whether each is installed. /v1/models lists the models this
// hearthd serves; this lists what is on the disk.
#pragma once

#include "ipc/handler.h"

namespace hearth::ipc {

// Scans ctx.models_dir (nothing when empty) on the calling thread: each file is mapped and
// its header read, milliseconds per file. Answers while the model is still loading too.
RouteResult installed_models(const Call& call);

}  // namespace hearth::ipc
