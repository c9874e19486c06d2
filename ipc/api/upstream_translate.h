// Ollama's and Anthropic's requests for a model an upstream serves (issue 45), in the one
// language every upstream speaks: OpenAI's chat completions (vLLM, SGLang, llama-server,
// another hearthd). Both ways, without I/O:
//   - the internal request (ApiRequest, which each surface's parser already fills) as the
//     body of POST /v1/chat/completions (or /v1/completions for a raw prompt);
//   - the upstream's answer, streamed chunks or one whole object, as the internal events
//     (ApiEvent) that each surface's own ResponseWriter writes (ollama_response.h,
//     anthropic_response.h), so no surface has a second writer for upstream models.
#pragma once

#include <chrono>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ipc/generation.h"

namespace hearth::ipc {

// The OpenAI body for req, model named remote_id. Only the sampling fields the request set
// itself go (sampling_given; penalties other than 0, a seed that is not random), so the
// upstream's model keeps its own defaults as a local model keeps hearth's; enable_thinking,
// when given, is chat_template_kwargs.enable_thinking (the name vLLM, SGLang, llama-server
// and hearth share); a reasoning budget is thinking_budget_tokens; top_logprobs >= 0 is
// chat's logprobs and top_logprobs (completions' logprobs: the number). A stream asks for
// usage (stream_options.include_usage: the final event's counts come from it) and for it in
// every chunk (continuous_usage_stats: the prompt's count before the answer).
nlohmann::ordered_json openai_upstream_body(const ApiRequest& req, const std::string& remote_id,
                                            std::optional<bool> enable_thinking);

// Reads one upstream answer into events. Streamed: chunk() for each event's JSON as it
// arrives, then done() once the stream ended with [DONE] or a finish_reason. Whole: whole().
// Thread-compatible (one answer, one thread).
class OpenAiAnswerReader {
 public:
  using Clock = std::chrono::steady_clock;

  // upstream: its name, said in the answer's timings; sent: when the request went out (TTFT
  // counts from there).
  OpenAiAnswerReader(std::string upstream, Clock::time_point sent);

  // One chunk of a stream: its text, reasoning and calls' pieces; an upstream's error chunk
  // is an Error event (502) with its message. A choice's logprobs (chat's content[] or
  // completions' parallel arrays) go with its first Text or Reasoning event, or the next one.
  std::vector<ApiEvent> chunk(const nlohmann::ordered_json& chunk, Clock::time_point now);
  // The prompt's tokens, once a chunk's usage said them (continuous_usage_stats, or the end).
  std::optional<int32_t> prompt_tokens() const {
    return usage_seen_ ? std::optional<int32_t>(usage_.prompt_tokens) : std::nullopt;
  }
  // Whether a chunk said how the answer finished (or an error ended it).
  bool finished() const { return finish_reason_.has_value(); }
  // The end of a stream: the call still open ended, then Done with the upstream's counts and
  // hearth's timings measured here (TTFT, ITL, decode rate).
  std::vector<ApiEvent> done(Clock::time_point now);

  // A whole answer (chat.completion or text_completion): its events, Done last; an Error
  // when it has no choices.
  std::vector<ApiEvent> whole(const nlohmann::ordered_json& body, Clock::time_point first_byte, Clock::time_point now);

 private:
  void read_usage(const nlohmann::ordered_json& chunk);
  void read_choice(const nlohmann::ordered_json& choice, Clock::time_point now, std::vector<ApiEvent>* out);
  void close_call(std::vector<ApiEvent>* out);

  std::string upstream_;
  Clock::time_point sent_;
  std::vector<Clock::time_point> tokens_;  // when each piece of content arrived
  std::optional<std::string> finish_reason_;
  std::string stop_sequence_;
  int open_call_ = -1;  // the upstream's index of the call being written; -1: none
  int n_calls_ = 0;     // calls begun; the open one's call_index is n_calls_ - 1
  RequestUsage usage_;
  bool usage_seen_ = false;
  std::vector<TokenLogprob> held_logprobs_;  // read, not yet given to a Text or Reasoning event
  RequestTimings upstream_timings_;          // an upstream hearthd's own, the parts the front cannot see
  std::string upstream_timings_json_;
};

// The error of an upstream's answer that is not a 200 (its OpenAI error object's message,
// or its body's first bytes), with the upstream's status.
ApiError upstream_answer_error(int status, const std::string& body, const std::string& upstream);

}  // namespace hearth::ipc
