// hearth's own small routes (docs/protocol.md): GET /health, GET /metrics (Prometheus text),
// POST /api/tokenize and /api/detokenize with the tokenizer of the model the body names.
#pragma once

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

}  // namespace hearth::ipc
