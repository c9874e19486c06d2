// OpenAI's chat and completion routes for a model an upstream serves (issue 45, upstream.h):
// the body validated as for a local model, then sent with the upstream's own model name
// and the caller's cache_salt (a keyed hash of the caller's cache scope, with the client's
// own salt folded in), and the answer relayed as it arrives (upstream_relay.h). A stream
// that breaks off ends with an error event; no answer at all is a 502/504 naming the
// upstream.
#pragma once

#include "ipc/handler.h"

namespace hearth::ipc {

RouteResult upstream_chat(const Call& call);
RouteResult upstream_completions(const Call& call);

}  // namespace hearth::ipc
