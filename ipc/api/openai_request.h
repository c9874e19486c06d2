// OpenAI's request bodies of /v1/chat/completions and /v1/completions, validated and
// parsed into the internal request (generation.h). No I/O here.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>
#include <vector>

#include "ipc/errors.h"
#include "ipc/generation.h"

namespace hearth::ipc {

enum class Endpoint { Chat, Completions };

// A validated request body: the internal request plus what only OpenAI's answer uses.
// Sampling defaults are OpenAI's (temperature 1, top_p 1), with top_k and min_p disabled
// unless given; max_tokens -1 means "until the context is full"; stop holds at most 4
// strings, empty ones dropped.
struct OpenAiRequest : ApiRequest {
  Endpoint endpoint = Endpoint::Chat;
  bool include_usage = false;  // stream_options.include_usage
  // stream_options.continuous_usage_stats (vLLM's): the usage counted so far before the end
  // too; hearth's opening chunk has the prompt's count (openai_response.h).
  bool continuous_usage = false;
};

// Validates types and ranges of every field hearth reads; unknown fields are ignored and
// null counts as absent. `model`, when present, must be model_id or one of its aliases
// (else 404).
std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, const nlohmann::ordered_json& body,
                                                           const std::string& model_id,
                                                           const std::vector<std::string>& aliases = {});

}  // namespace hearth::ipc
