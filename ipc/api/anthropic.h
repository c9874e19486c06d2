// Anthropic's Messages API (docs/protocol.md): the handlers the route table names for its
// paths. Errors are Anthropic's error object ({"type": "error", "error": {"type",
// "message"}}); the x-api-key and anthropic-version headers its clients send are ignored.
//   POST /v1/messages: the body parsed into the internal request (anthropic_request.h),
//     answered by an Anthropic writer (anthropic_response.h), whole or streamed;
//   POST /v1/messages/count_tokens: {"input_tokens": N}, the tokens of the prompt the same
//     body renders to (system, messages, tools), without generating.
#pragma once

#include "ipc/handler.h"

namespace hearth::ipc {

// Tool use needs the template's tool format and the engine's constrained decoding of calls
// (issue 41, item 5), which land apart from this adapter; until then a request that offers
// tools, or whose conversation holds tool_use or tool_result blocks, is refused (400) rather
// than answered as if it had none. The adapter and its writer already speak tool_use both
// ways: set this to true when the engine does (the tests read it too).
inline constexpr bool kAnthropicToolUseReady = true;

RouteResult anthropic_messages(const Call& call);
RouteResult anthropic_count_tokens(const Call& call);

}  // namespace hearth::ipc
