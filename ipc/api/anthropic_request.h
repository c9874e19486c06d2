// Anthropic's request bodies of POST /v1/messages and /v1/messages/count_tokens, validated
// and parsed into the internal request (generation.h). No I/O here.
//
// How a conversation maps (docs/protocol.md has the table):
//   system (a string or text blocks)        -> a first "system" message
//   user text blocks                        -> a "user" message (blocks as parts)
//   user tool_result blocks                 -> a "tool" message each, with tool_call_id, in
//                                              place: text before them is a user message
//                                              before them, text after one after them
//   assistant text and tool_use blocks      -> one "assistant" message with tool_calls (input
//                                              object -> arguments JSON text, id kept)
//   assistant thinking blocks               -> dropped (no hearth model reads them)
//   consecutive turns of one role           -> one turn, as Anthropic combines them
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>

#include "engine/tokenizer/chat_template.h"
#include "ipc/errors.h"
#include "ipc/generation.h"

namespace hearth::ipc {

// What a body is for: a message to generate (max_tokens required, as Anthropic requires
// it), or only the count of its prompt's tokens (max_tokens, stream and sampling ignored).
enum class AnthropicPurpose { Message, CountTokens };

// At most this many stop_sequences: Anthropic documents no limit; each one costs a search of
// the held text at every token.
inline constexpr size_t kMaxStopSequences = 16;

// Validates the types and ranges of every field hearth reads; unknown fields are ignored and
// null counts as absent. Sampling defaults are Anthropic's: temperature 1 (its range is
// 0..1), no top_p or top_k unless given. `metadata` is accepted and unused (its user_id is
// not a cache scope: the scope comes from the connection's peer). `thinking` enabled, image
// and document blocks, server tools and a final assistant message (a prefill) are refused
// with 400, which names them.
std::variant<ApiRequest, ApiError> parse_anthropic_request(const nlohmann::ordered_json& body,
                                                           AnthropicPurpose purpose);

// The tool as an OpenAI client would have sent it, {"type": "function", "function": {"name",
// "description" (when given), "parameters"}}, as JSON text: Tool::json, so that a template
// renders the same text for a tool whichever API offered it.
std::string openai_tool_json(const Tool& tool);

}  // namespace hearth::ipc
