// The wire format shared with hearthd (OpenAI-compatible JSON), and nothing else: request
// bodies from the C API's arguments, and text, stats and errors from responses and stream
// chunks. nlohmann_json stays behind this header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/client.h"
#include "outcome.h"

namespace hearth::client::wire {

enum class Route { kChat, kCompletion };

// Copies the caller's options (of any struct_size this version can read) over the defaults.
// INVALID_ARGUMENT when struct_size is too small to be an initialised struct.
Outcome read_options(const hearth_request_options* in, hearth_request_options* out);

// The JSON body of POST /v1/chat/completions or /v1/completions. Streams ask for usage
// (stream_options.include_usage), which carries the stats. INVALID_ARGUMENT for NULL
// strings, non-finite numbers, text that is not UTF-8, tools or a schema that is not JSON,
// and tools on a completion.
Outcome chat_body(const hearth_message* messages, size_t n_messages, const hearth_request_options& options, bool stream,
                  std::string* out);
// The same from hearth_chat_message (tool calls, tool results), read with the stride of the
// first element's struct_size.
Outcome chat_v2_body(const hearth_chat_message* messages, size_t n_messages, const hearth_request_options& options,
                     bool stream, std::string* out);
Outcome completion_body(const char* prompt, const hearth_request_options& options, bool stream, std::string* out);

// A tool call of an answer, whole or as far as a stream has told it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text; a stream's pieces appended
};

// Where a chunk's or a response's parts go: text is appended to, calls added to; reasoning
// (a chat's reasoning_content) appended to, or dropped when NULL.
struct Answer {
  std::string* text;
  std::vector<ToolCall>* calls;
  std::string* reasoning = nullptr;
};

// One stream chunk (the data of one server-sent event, not "[DONE]"): appends its text (and
// delta.reasoning_content) to *piece, adds its delta.tool_calls to its calls (a call's first piece, with "index", "id"
// and the name, opens it; later pieces with the same index append to its arguments), and records finish_reason, usage
// and timings in *stats. An {"error": ...} chunk gives HEARTH_ERR_SERVER with the daemon's message; bad JSON, or a call
// piece whose index opens no call in order, gives HEARTH_ERR_PROTOCOL.
Outcome parse_chunk(std::string_view data, Route route, Answer* piece, hearth_stats* stats);

// A whole (non-streamed) response body: the text and the message.tool_calls of choices[0],
// usage and timings.
Outcome parse_response(std::string_view body, Route route, Answer* whole, hearth_stats* stats);

// The Outcome for a response with a non-2xx status: the code for the status (429 BUSY,
// 503 UNAVAILABLE, 400/404/413/422 BAD_REQUEST, 500 SERVER, others HTTP) and the message of
// the daemon's {"error": {"message": ...}} object, or the start of the body when it has none.
Outcome error_from_response(int status, std::string_view body);

struct Model {
  std::string id;
  std::string owned_by;
  int64_t created = 0;
};
// GET /v1/models: {"object": "list", "data": [{"id", "object", "created", "owned_by"}, ...]}.
Outcome parse_models(std::string_view body, std::vector<Model>* out);

// POST /api/cache/warm: {"prompt": prompt} when prompt is not NULL, else {"messages": ...}.
Outcome warm_body(const char* prompt, const hearth_message* messages, size_t n_messages, std::string* out);
// Its answer: tokens, cached_tokens.{memory,disk}, prefilled_tokens, chunks_written and
// timings.{cache_restore_ms,prefill_ms} into *out (a full-size struct).
Outcome parse_warm(std::string_view body, hearth_warm_result* out);

// "stop" -> HEARTH_FINISH_STOP, "length" -> HEARTH_FINISH_LENGTH, "tool_calls" ->
// HEARTH_FINISH_TOOL_CALLS, "" -> NONE, else OTHER.
int finish_reason_code(std::string_view reason);

}  // namespace hearth::client::wire
