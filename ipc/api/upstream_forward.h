// OpenAI's chat and completion routes for a model an upstream serves (issue 45, upstream.h):
// the body validated as for a local model, then sent with the upstream's own model name
// and the caller's cache_salt (a keyed hash of the caller's cache scope, with the client's
// own salt folded in), and the answer relayed as it arrives (upstream_relay.h). A stream
// that breaks off ends with an error event; no answer at all is a 502/504 naming the
// upstream.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "ipc/handler.h"

namespace hearth::ipc {

RouteResult upstream_chat(const Call& call);
RouteResult upstream_completions(const Call& call);

// Ollama's /api/chat and /api/generate and Anthropic's /v1/messages for an upstream model
// (upstream_surfaces.cpp): the body validated by the surface's own parser, sent as an OpenAI
// chat request (upstream_translate.h), the answer written by the surface's own writer; the
// same retry, fallback and breaker, errors in the surface's own shape.
RouteResult upstream_ollama_chat(const Call& call);
RouteResult upstream_ollama_generate(const Call& call);
RouteResult upstream_anthropic_messages(const Call& call);

// Whether a failed request is answered by the upstream model's local fallback: then the
// request to answer instead (the same body naming the fallback model, fallback_from set) is
// left in reroute.
using OnFailure = std::function<bool(const ForwardFailure& failure)>;
OnFailure fallback_to_local(const Call& call, std::shared_ptr<std::optional<HttpRequest>> reroute);

// A failure before any answer came as an error: 502/504, type "upstream_error".
ApiError failure_error(const ForwardFailure& failure);

}  // namespace hearth::ipc
