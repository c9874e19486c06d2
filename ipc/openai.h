// The OpenAI-compatible part of the wire format: request bodies of /v1/chat/completions
// and /v1/completions parsed and validated into what the engine takes, and the response
// and stream-chunk JSON built from what it gives back. No I/O here.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/sampling/params.h"
#include "engine/scheduler/request.h"
#include "engine/tokenizer/chat_template.h"
#include "ipc/errors.h"
#include "ipc/model_host.h"

namespace hearth {
class Tokenizer;
}

namespace hearth::ipc {

enum class Endpoint { Chat, Completions };

// A validated request body. Sampling defaults are OpenAI's (temperature 1, top_p 1), with
// top_k and min_p disabled unless given; max_tokens -1 means "until the context is full".
struct OpenAiRequest {
  Endpoint endpoint = Endpoint::Chat;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::vector<ChatMessage> messages;  // Chat
  std::string prompt;                 // Completions
  int32_t max_tokens = -1;
  SamplingParams sampling;
  std::vector<std::string> stop;  // at most 4, empty strings dropped
  // Narrows the request's prompt-cache scope (vLLM's name): 1..256 printable ASCII bytes.
  std::optional<std::string> cache_salt;
  // Ollama's keep_alive: how long the model stays loaded after this request (a hearthd
  // serving several models); nullopt: the daemon's --keep-alive.
  std::optional<KeepAlive> keep_alive;
};

// Validates types and ranges of every field hearth reads; unknown fields are ignored and
// null counts as absent. `model`, when present, must be model_id or one of its aliases
// (else 404).
std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, const nlohmann::json& body,
                                                           const std::string& model_id,
                                                           const std::vector<std::string>& aliases = {});

// Ollama's keep_alive: a number of seconds or a duration text (common/duration.h); 0
// unloads the model after the answer, a negative value keeps it loaded. Else 400.
std::optional<ApiError> parse_keep_alive(const nlohmann::json& value, std::optional<KeepAlive>* out);

// Renders the chat (family's template) or tokenizes the prompt (BOS added, special-token
// text kept literal) and checks the prompt fits: 1 .. n_ctx - 1 tokens, else 400 with
// code "context_length_exceeded".
std::variant<GenerationRequest, ApiError> build_generation(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                           const ChatTemplate& chat_template, int32_t n_ctx);

// What identifies one response; shared by all of its stream chunks.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool include_usage = false;
};

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model_id, bool include_usage);

// OpenAI's finish_reason for the engine's. "cancelled" (the client went away, or the
// daemon stopped before the answer was done) becomes "length": the text was cut short,
// and "length" is the value OpenAI clients already treat that way.
std::string openai_finish_reason(const std::string& engine_reason);

// Non-streamed response body (chat.completion / text_completion).
std::string completion_body(const ResponseMeta& meta, const std::string& text, const RequestEvent& finished);

// Stream chunks (JSON text, without SSE framing). The chat stream opens with a role chunk;
// every text piece is one chunk; the finish chunk has an empty delta (chat) or empty text
// (completions), the finish_reason and hearth's timings; the usage chunk (only when
// include_usage) has "choices": [] and usage (+timings).
std::string chunk_role(const ResponseMeta& meta);
std::string chunk_text(const ResponseMeta& meta, const std::string& piece);
std::string chunk_finish(const ResponseMeta& meta, const RequestEvent& finished);
std::string chunk_usage(const ResponseMeta& meta, const RequestEvent& finished);

// SSE framing of one event: "data: <payload>\n\n".
std::string sse_event(const std::string& payload);

// hearth's "timings" object of a finished request: the RequestTimings, plus where the
// prompt's tokens came from: "cached_tokens": {"memory", "disk"} and "prefilled_tokens".
nlohmann::json timings_object(const RequestEvent& finished);

}  // namespace hearth::ipc
