// Ollama's request bodies of /api/chat and /api/generate (docs/protocol.md, "Ollama's API"),
// validated and parsed into the internal request (generation.h). No I/O here.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <variant>

#include "ipc/errors.h"
#include "ipc/generation.h"

namespace hearth::ipc {

enum class OllamaEndpoint { Chat, Generate };

// A validated body: the internal request plus what only Ollama's answer uses. Sampling
// defaults are Ollama's (api/types.go DefaultOptions): temperature 0.8, top_k 40, top_p 0.9,
// min_p 0, repeat_penalty 1.0, repeat_last_n 64, a random seed, num_predict -1 (until the
// context is full). stream defaults to true.
struct OllamaRequest : ApiRequest {
  OllamaEndpoint endpoint = OllamaEndpoint::Chat;
  std::string model;  // the name as the client gave it ("" when absent), echoed in every answer object
  // Nothing to generate: an empty prompt (generate) or no messages (chat) loads the model,
  // or with keep_alive 0 unloads it; the answer is one object, done_reason "load" or "unload".
  bool load_only = false;
  // think: true or a level, false; nullopt when absent. A model whose template has no
  // reasoning block refuses true (as Ollama); a thinking model thinks unless false (its
  // template's enable_thinking), and its reasoning is message.thinking (generate: thinking).
  std::optional<bool> think;
  bool logprobs = false;  // each text object carries its tokens' logprobs (top_logprobs alternatives)
};

// Validates types and ranges of every field hearth reads; null counts as absent. Unknown
// fields, and the options hearth does not implement (num_keep, typical_p, num_gpu, ...), are
// ignored as Ollama ignores options it does not know. Refused with 400: a custom `template`,
// a `suffix`, a non-empty `context` or `images`, `raw` with `system`, a `format` that is neither
// "json" nor an object, options of the wrong type or out of range. num_ctx is read and
// ignored: the context is the daemon's (--ctx), for every request.
std::variant<OllamaRequest, ApiError> parse_ollama_request(OllamaEndpoint endpoint, const nlohmann::ordered_json& body);

// Whether a body needs its model loaded (the route table's loads_model): all but Ollama's
// unload request, nothing to generate with keep_alive 0, which must not load the model only
// to unload it.
bool ollama_loads_model(const nlohmann::ordered_json& body);

}  // namespace hearth::ipc
