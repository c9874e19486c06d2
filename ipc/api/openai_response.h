// OpenAI's answers: the response body and the stream chunks of /v1/chat/completions and
// /v1/completions, and the ResponseWriter that writes the events of one answer with them
// (SSE: "data: <chunk>\n\n" ... "data: [DONE]\n\n"). No I/O here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "ipc/api/openai_request.h"
#include "ipc/generation.h"

namespace hearth::ipc {

// What identifies one response; shared by all of its stream chunks.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  bool include_usage = false;
  // continuous_usage_stats with include_usage: the chat stream's opening chunk has the usage
  // so far (the prompt's tokens, none generated) instead of null.
  bool continuous_usage = false;
  int32_t prompt_tokens = -1;  // the tokenized prompt's (ResponseWriter::prompt_counted); -1: not known
  bool logprobs = false;       // the request asked for logprobs: each choice carries them
  // The answer comes from a local fallback model because this upstream failed: said in
  // timings ("fallback_from", "fallback_reason").
  std::string fallback_from;
  std::string fallback_reason;
};

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model_id, bool include_usage);

// OpenAI's finish_reason for the engine's. "cancelled" (the client went away, or the
// daemon stopped before the answer was done) becomes "length": the text was cut short,
// and "length" is the value OpenAI clients already treat that way. An answer that made tool
// calls and stopped says "tool_calls".
std::string openai_finish_reason(const std::string& engine_reason, bool called_tools = false);

// A whole answer as it accumulates: its text, its reasoning, its calls, its tokens' logprobs.
struct OpenAiAnswer {
  std::string text;
  std::string reasoning;  // a thinking model's reasoning block: message.reasoning_content
  std::vector<ToolCall> tool_calls;
  std::vector<TokenLogprob> logprobs;
};

// Non-streamed response body (chat.completion / text_completion). The chat message carries
// reasoning_content (after content, as llama-server writes it) when the answer had reasoning.
std::string completion_body(const ResponseMeta& meta, const OpenAiAnswer& answer, const ApiEvent& done);

// Stream chunks (JSON text, without SSE framing). The chat stream opens with a role chunk
// (with continuous_usage, its usage: prompt_tokens, completion_tokens 0, total_tokens);
// every text piece is one chunk (with its tokens' logprobs when asked for); a tool call is a
// chunk with its index, id and name, then a chunk per piece of its arguments; the finish
// chunk has an empty delta (chat) or empty text (completions), the finish_reason and hearth's
// timings; the usage chunk (only when include_usage) has "choices": [] and usage (+timings).
std::string chunk_role(const ResponseMeta& meta);
// text_offset: the answer's bytes before this piece (completions' logprobs count from it).
std::string chunk_text(const ResponseMeta& meta, const std::string& piece,
                       const std::vector<TokenLogprob>& logprobs = {}, size_t text_offset = 0);
// A piece of reasoning: {"delta": {"reasoning_content": piece}} (llama-server's and vLLM's).
std::string chunk_reasoning(const ResponseMeta& meta, const std::string& piece,
                            const std::vector<TokenLogprob>& logprobs = {});
std::string chunk_call_begin(const ResponseMeta& meta, const ApiEvent& begin);
std::string chunk_call_arguments(const ResponseMeta& meta, const ApiEvent& piece);
std::string chunk_finish(const ResponseMeta& meta, const ApiEvent& done, bool called_tools = false);
std::string chunk_usage(const ResponseMeta& meta, const ApiEvent& done);

// SSE framing of one event: "data: <payload>\n\n".
std::string sse_event(const std::string& payload);

// The writer of one OpenAI answer, streamed (SSE) or whole (stream false).
std::unique_ptr<ResponseWriter> openai_writer(ResponseMeta meta, bool stream);

}  // namespace hearth::ipc
