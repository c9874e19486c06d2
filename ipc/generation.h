// The core every API surface shares: one internal request (ApiRequest) that each adapter
// (ipc/api/*) parses its JSON into, and one stream of events (ApiEvent) that each adapter's
// ResponseWriter writes in its own wire format. Between them: the request rendered and
// tokenized for a model (GenerationJob), and the engine's events turned into ApiEvents.
//
//   adapter's JSON -> ApiRequest -> make_job() (handler.h) -> Scheduler::submit (the connection)
//   RequestEvent -> EventStream::feed() -> ApiEvent -> ResponseWriter -> bytes on the wire
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/sampling/defaults.h"
#include "engine/sampling/params.h"
#include "engine/scheduler/request.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/reasoning.h"
#include "engine/tokenizer/tool_calls.h"
#include "ipc/errors.h"
#include "ipc/http_types.h"
#include "ipc/model_host.h"

namespace hearth {
class Tokenizer;
}

namespace hearth::ipc {

// What the answer must be: free text, any JSON object, or JSON that fits a schema.
struct ResponseFormat {
  enum class Kind { Text, JsonObject, JsonSchema };
  Kind kind = Kind::Text;
  std::string schema;   // JsonSchema: the JSON Schema, as JSON text
  bool strict = false;  // OpenAI's json_schema.strict
};

// Whether and how the model calls the request's tools.
enum class ToolChoice {
  None,      // never: the tools are shown to the model, its text stays text
  Auto,      // when the model opens a call (in its own syntax, or as small models do)
  Required,  // the whole answer is one or more calls
  Named,     // the whole answer is a call of tool_choice_name
};

// What a client asks a model for, whichever API it spoke. Validated by the adapter.
struct ApiRequest {
  bool chat = true;                   // messages, rendered with the model's template; else prompt
  std::vector<ChatMessage> messages;  // chat
  ChatOptions chat_options;           // chat: what the template takes besides the messages
  // Tokens the reasoning block may take before the engine closes it (Anthropic's
  // thinking.budget_tokens, llama-server's thinking_budget_tokens); < 0: no bound. Only for
  // a template that thinks, with enable_thinking (engine/scheduler/reasoning_budget.h).
  int32_t reasoning_budget = -1;
  std::string prompt;  // not chat: the text as given (BOS added)
  // Not chat: special-token text in the prompt becomes its token ("<|im_start|>"), as when the
  // client wrote the template itself (Ollama's raw mode); else it is plain text.
  bool parse_special = false;
  int32_t max_tokens = -1;  // < 0: until the context is full
  // The API's defaults, and the fields the request gave; make_job() fills each field the
  // request left out (not in sampling_given, SamplingField bits) from the model's defaults.
  SamplingParams sampling;
  uint32_t sampling_given = 0;
  std::vector<std::string> stop;  // non-empty strings
  // Narrows the request's prompt-cache scope (vLLM's name): 1..256 printable ASCII bytes.
  std::optional<std::string> cache_salt;
  // How long the model stays loaded after this request; nullopt: the daemon's --keep-alive.
  std::optional<KeepAlive> keep_alive;
  bool stream = false;  // events are written as they come, else one answer at the end
  ResponseFormat response_format;
  std::vector<Tool> tools;  // names unique, parameters a JSON Schema object each
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_name;     // Named: the tool's name
  bool parallel_tool_calls = true;  // false: one call at most
  // Log-probabilities of each generated token, with this many most likely alternatives
  // (0..20); -1: none.
  int32_t top_logprobs = -1;
  // false: no speculative decoding for this request (hearth's `speculative`, Ollama's
  // options.speculative). The answer is the same either way; only its speed changes.
  bool speculative = true;
};

// One thing the answer says, in order. Exactly one Done or Error ends the stream. A tool call
// is CallBegin, its arguments' JSON text in CallArguments pieces, CallEnd; calls do not
// interleave. Reasoning (a thinking model's block, reasoning.h) comes before any Text or call.
struct ApiEvent {
  enum class Kind { Text, Reasoning, CallBegin, CallArguments, CallEnd, Done, Error };
  Kind kind = Kind::Text;
  // Text: a piece of valid UTF-8 content; Reasoning: a piece of the reasoning; CallArguments:
  // a piece of the JSON.
  std::string text;
  std::vector<TokenLogprob> logprobs;  // Text, Reasoning: the tokens this text came from, when asked for
  int32_t call_index = 0;              // Call*: which call of the answer (0, 1, ...)
  std::string call_id;                 // CallBegin: "call_..."
  std::string call_name;               // CallBegin: the function's name
  std::string finish_reason;           // Done: the engine's: "stop", "length" or "cancelled"
  std::string stop_sequence;           // Done "stop": the stop string that ended the answer; "" for end of turn
  RequestUsage usage;                  // Done
  RequestTimings timings;              // Done
  ApiError error;                      // Error
  // Done: members timings_object adds to hearth's timings, as a JSON object's text (an
  // upstream model's "upstream" and "upstream_timings"); "" for none.
  std::string timings_more;
};

// Turns the engine's events for one request into ApiEvents. With tools offered, the text
// goes through a ToolCallParser: calls come out as CallBegin / CallArguments / CallEnd (ids
// "call_..."), the rest as Text; whitespace alone next to a call is layout, not content.
// A Text event's logprobs go with the first Text or Reasoning it yields (or the next one).
// With split_reasoning(), a reasoning block at the start of the answer comes out as
// Reasoning events and only the text after it is content (and read for calls).
class EventStream {
 public:
  EventStream();
  // Calls written in one of forms, naming one of names, are split out of the text.
  EventStream(std::vector<CallForm> forms, std::vector<std::string> names);
  // The answer may open with a reasoning block (chat_family_thinks); `inside`: the prompt
  // opened it already.
  void split_reasoning(bool inside = false);
  ~EventStream();
  EventStream(EventStream&&) noexcept;
  EventStream& operator=(EventStream&&) noexcept;

  std::vector<ApiEvent> feed(RequestEvent ev);
  // The Done event's timings_more: members for its timings (a JSON object's text).
  void add_to_timings(std::string json_object) { timings_more_ = std::move(json_object); }

 private:
  void text(std::string text, std::vector<TokenLogprob> logprobs, std::vector<ApiEvent>& out);
  void parsed(std::vector<ToolCallParser::Event> events, std::vector<ApiEvent>& out);
  void content(std::string text, std::vector<ApiEvent>& out);
  void answer(std::string text, std::vector<ApiEvent>& out);  // content, through the parser when there is one
  void split(std::vector<ReasoningSplitter::Piece> pieces, std::vector<ApiEvent>& out);

  std::unique_ptr<ReasoningSplitter> reasoning_;  // null: no reasoning block to split out
  std::unique_ptr<ToolCallParser> parser_;        // null: no tools, text is text
  std::string held_space_;                        // whitespace-only content, kept back in case a call follows
  std::vector<TokenLogprob> held_logprobs_;
  std::vector<std::string> call_ids_;  // by call index
  std::string timings_more_;
};

// How one API surface writes one answer. Streamed: the connection sends open(), then what
// write() returns for each event, as they come. Whole: write() collects, and response()
// is the answer once Done or Error was written.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual bool streamed() const = 0;
  // The error object of an answer that fails before it starts (a grammar that does not
  // compile, a full queue).
  virtual ErrorShape error_shape() const { return ErrorShape::OpenAi; }
  virtual std::string content_type() const { return "text/event-stream"; }  // of a stream
  virtual std::string open() { return ""; }
  // The prompt's tokens when they are learned after the writer was made, before open(): an
  // upstream model's count (its usage), which a local model's writer is given at once.
  virtual void prompt_counted(int32_t /*n_tokens*/) {}
  virtual std::string write(const ApiEvent& ev) = 0;
  virtual HttpResponse response() = 0;
};

// A generation ready to submit: the engine, the tokenized request, the writer of its answer.
struct GenerationJob {
  std::shared_ptr<const EngineRef> engine;
  GenerationRequest request;
  EventStream events;  // the engine's events -> ApiEvents, for this request (its tools)
  std::unique_ptr<ResponseWriter> writer;
  std::optional<KeepAlive> keep_alive;  // the request's keep_alive, for the host when it ends
  std::string log_id;                   // names the request in the log
  // Work for a thread of its own before the job is submitted (compiling the grammar of a
  // response format or a tool list can take a while); an error answers the request instead.
  std::function<std::optional<ApiError>(GenerationRequest&)> prepare;
};

// Renders the chat (the model's template) or tokenizes the prompt (BOS added, special-token
// text kept literal unless parse_special) and checks the prompt fits: 1 .. n_ctx - 1 tokens,
// else 400 with code "context_length_exceeded".
std::variant<GenerationRequest, ApiError> build_generation(const ApiRequest& request, const Tokenizer& tokenizer,
                                                           const ChatTemplate& chat_template, int32_t n_ctx);

// Ollama's keep_alive, also hearth's: a number of seconds or a duration text
// (common/duration.h); 0 unloads the model after the answer, a negative value keeps it
// loaded. Else 400.
std::optional<ApiError> parse_keep_alive(const nlohmann::ordered_json& value, std::optional<KeepAlive>* out);

// hearth's "timings" object of a finished request: the RequestTimings, plus where the
// prompt's tokens came from: "cached_tokens": {"memory", "disk"} and "prefilled_tokens",
// then the members of done.timings_more.
nlohmann::ordered_json timings_object(const ApiEvent& done);

// prefix + 24 random letters and digits: ids of responses and calls.
std::string random_id(const std::string& prefix);

}  // namespace hearth::ipc
