// Ollama's answers to /api/chat and /api/generate, and the ResponseWriter that writes the
// events of one answer with them: NDJSON (application/x-ndjson, one JSON object a line) when
// streamed, one object when not. No I/O here.
//
// Every object has "model" (the name the client gave) and "created_at" (RFC 3339, UTC, with
// nanoseconds); a text piece is {"message": {"role": "assistant", "content"}} (chat) or
// {"response"} (generate) with "done": false; the last object has "done": true, "done_reason"
// and the counts and durations below, in nanoseconds, and hearth's own "timings".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "ipc/api/ollama_request.h"
#include "ipc/generation.h"

namespace hearth::ipc {

// What identifies one answer, shared by all of its objects.
struct OllamaMeta {
  OllamaEndpoint endpoint = OllamaEndpoint::Chat;
  std::string model;  // echoed in every object
  // When the handler took the request; total_duration runs from here (plus load_wait).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::chrono::nanoseconds load_wait{0};  // the request's wait for its model to load
  bool logprobs = false;                  // each text object carries its tokens' logprobs
};

// RFC 3339 in UTC with nanoseconds ("2024-05-01T12:00:00.123456789Z") of a time since the
// epoch; rfc3339_now() of the system clock now.
std::string rfc3339(std::chrono::nanoseconds since_epoch);
std::string rfc3339_now();

// The counts and durations (ns) of a final object, from hearth's timings (ms):
//   prompt_eval_count    = prompt tokens (cached ones included; timings says how many were)
//   prompt_eval_duration = cache restore + prefill: reading the prompt, through the logits of
//                          its last token
//   eval_count           = generated tokens
//   eval_duration        = from the prompt read to the last token: the first token's
//                          sampling (ttft - queue - restore - prefill, at least 0) + decode
//   load_duration        = the request's wait for its model to load (0 when it was loaded)
//   total_duration       = load_duration + from the handler to the end of the answer
struct OllamaDurations {
  int64_t total_ns = 0, load_ns = 0, prompt_eval_ns = 0, eval_ns = 0;
  int32_t prompt_eval_count = 0, eval_count = 0;
};
OllamaDurations ollama_durations(const ApiEvent& done, std::chrono::nanoseconds load_wait,
                                 std::chrono::nanoseconds since_started);

// Ollama's done_reason for the engine's finish_reason: "stop" and "length" pass through;
// "cancelled" (the daemon stopped before the answer was done) is "connection_closed", Ollama's
// reason for an answer its runner stopped giving.
std::string ollama_done_reason(const std::string& engine_reason);

// The one object answering a request with nothing to generate: done_reason "load" or "unload".
nlohmann::ordered_json ollama_load_answer(OllamaEndpoint endpoint, const std::string& model, const char* done_reason);

// The writer of one Ollama answer, streamed (NDJSON) or whole. A tool call becomes an object
// with message.tool_calls (its arguments parsed into a JSON object) when its CallEnd comes;
// an engine failure is the line {"error": "..."} (streamed) or an Ollama error response.
std::unique_ptr<ResponseWriter> ollama_writer(OllamaMeta meta, bool stream);

}  // namespace hearth::ipc
