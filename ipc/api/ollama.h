// Ollama's API (docs/protocol.md, "Ollama's API"): the handlers the route table names for the
// paths Ollama's clients use. Every error is Ollama's {"error": "..."}.
//   ollama.cpp         POST /api/chat, /api/generate: the body parsed into the internal request
//                      (ollama_request.h), answered by an Ollama writer (ollama_response.h)
//   ollama_models.cpp  GET /api/tags, POST /api/show, GET /api/ps, GET /api/version, POST
//                      /api/pull (streamed by ollama_pull.h), DELETE /api/delete, POST
//                      /api/copy, GET (and HEAD) /, and 501 for the routes hearth does not have
#pragma once

#include "engine/tokenizer/chat_template.h"
#include "ipc/handler.h"

namespace hearth::ipc {

RouteResult ollama_chat(const Call& call);
RouteResult ollama_generate(const Call& call);

RouteResult ollama_tags(const Call& call);
RouteResult ollama_show(const Call& call);
// Ollama's entry for each loaded model, with hearth's own fields (hearth.h loaded_model_json)
// beside them: no key of the two clashes.
RouteResult ollama_ps(const Call& call);
RouteResult ollama_version(const Call& call);
RouteResult ollama_pull(const Call& call);
RouteResult ollama_delete(const Call& call);
RouteResult ollama_copy(const Call& call);
RouteResult ollama_root(const Call& call);
// 501 naming the route: /api/embed, /api/embeddings, /api/create, /api/push.
RouteResult ollama_not_implemented(const Call& call);

// Whether hearth can offer tools to a model with this template: when the template has a
// tool-call syntax. Otherwise /api/chat refuses a request with tools as Ollama refuses it for
// a model without the capability, and /api/show leaves "tools" out of the capabilities.
bool ollama_model_calls_tools(const ChatTemplate& chat_template);

// Ollama's version hearth's adapter follows (clients check it before using newer fields).
inline constexpr const char* kOllamaApiVersion = "0.32.15";

}  // namespace hearth::ipc
