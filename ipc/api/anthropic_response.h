// Anthropic's answers to POST /v1/messages: the message object, and the ResponseWriter that
// writes one answer's events either whole or as Anthropic's stream. No I/O here.
//
// The stream (SSE, each event "event: <type>\ndata: <json>\n\n"):
//   message_start (the message with no content; usage.input_tokens = the prompt's tokens),
//   ping,
//   per content block: content_block_start, content_block_delta (text_delta, or
//     input_json_delta with a piece of a tool_use's input), content_block_stop,
//   message_delta (stop_reason, stop_sequence, the final usage), message_stop;
//   an engine failure: an "error" event with Anthropic's error object, and nothing after it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "ipc/generation.h"

namespace hearth::ipc {

// What identifies one answer and what its stop_reason depends on.
struct AnthropicMeta {
  std::string id;  // "msg_..."
  std::string model;
  // The rendered prompt's tokens, for message_start; an upstream model's come from its
  // answer (ResponseWriter::prompt_counted), 0 when it says them only at the end.
  int32_t prompt_tokens = 0;
  int32_t max_tokens = 0;  // the request's, to tell max_tokens from a full context window
};

AnthropicMeta new_anthropic_meta(const std::string& model_id, int32_t max_tokens);

// Anthropic's stop_reason for an answer that is Done:
//   "stop" by a stop string       -> "stop_sequence" (stop_sequence says which)
//   "stop" after a tool call      -> "tool_use"
//   "stop" by the end of its turn -> "end_turn"
//   "length", max_tokens reached  -> "max_tokens"
//   "length" before max_tokens    -> "model_context_window_exceeded" (the context was full)
//   "cancelled"                   -> "max_tokens": the daemon stopped before the answer was
//                                    done; the text was cut short, which clients already
//                                    read max_tokens as (a client that left reads nothing)
std::string anthropic_stop_reason(const ApiEvent& done, bool called_tools, int32_t max_tokens);

// The usage object. Anthropic splits the prompt in three, and they add up to it:
//   input_tokens                 the prompt's tokens computed (prefilled) for this answer
//   cache_read_input_tokens      those whose KV came from hearth's prompt cache (memory or disk)
//   cache_creation_input_tokens  0: hearth caches every prompt's prefix by itself, at no cost
//                                beyond the prefill input_tokens already counts; nothing is
//                                written at a client's request (cache_control is ignored)
// and output_tokens, the generated tokens.
nlohmann::ordered_json anthropic_usage(const RequestUsage& usage);

// The writer of one answer: streamed (stream true) or one message object at the end.
std::unique_ptr<ResponseWriter> anthropic_writer(AnthropicMeta meta, bool stream);

}  // namespace hearth::ipc
