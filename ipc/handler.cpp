#include "ipc/handler.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/constraints.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

namespace {

// Whether a grammar holds the answer from its first token (a response format, tool_choice
// required or a named tool): it leaves no room for a reasoning block, so a thinking template
// is asked not to think, as its own enable_thinking false does.
bool constrained_from_start(const ApiRequest& request) {
  if (calls_tools(request))
    return request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named;
  return request.response_format.kind != ResponseFormat::Kind::Text;
}

// The bound on a thinking answer's reasoning block: past budget tokens the engine writes the
// block's end as the template writes it after a turn's reasoning ("\n</think>\n\n" in
// Qwen3's, "</think>" its special token) and the answer goes on. Unbounded (the default)
// when the request gives no budget, the template does not think, or thinking is off.
ReasoningLimit reasoning_limit(const ApiRequest& request, bool thinks, const ChatTemplate& tmpl,
                               const Tokenizer& tokenizer) {
  ReasoningLimit limit;
  if (request.reasoning_budget < 0 || !thinks || !request.chat || !chat_family_thinks(tmpl.family)) return limit;
  limit.max_tokens = request.reasoning_budget;
  limit.close_tokens = tokenizer.encode("\n</think>\n\n", false, true);
  return limit;
}

}  // namespace

std::variant<GenerationJob, ApiError> make_job(const Call& call, const ApiRequest& request,
                                               std::unique_ptr<ResponseWriter> writer, std::string log_id) {
  const EngineRef& engine = *call.engine;
  if (std::optional<ApiError> e = check_constraints(request)) return *e;
  std::optional<ApiRequest> unthinking;
  if (request.chat_options.enable_thinking && constrained_from_start(request)) {
    unthinking = request;
    unthinking->chat_options.enable_thinking = false;
  }
  std::variant<GenerationRequest, ApiError> gen =
      build_generation(unthinking ? *unthinking : request, *engine.tokenizer, engine.model.chat_template, engine.n_ctx);
  if (auto* e = std::get_if<ApiError>(&gen)) return *e;
  GenerationJob job;
  job.engine = call.engine;
  job.request = std::move(std::get<GenerationRequest>(gen));
  // A thinking model answering without thinking takes its publisher's values for that mode.
  const ModelSampling& model = engine.model.sampling;
  const bool thinks = (unthinking ? *unthinking : request).chat_options.enable_thinking;
  const SamplingDefaults& defaults = !thinks && model.no_thinking ? *model.no_thinking : model.defaults;
  job.request.sampling = with_model_defaults(request.sampling, request.sampling_given, defaults);
  job.request.scope = cache_scope(call.ctx.peer, call.ctx.scope_mode, request.cache_salt);
  job.request.top_logprobs = request.top_logprobs;
  job.request.speculative = request.speculative;
  job.request.reasoning = reasoning_limit(request, thinks, engine.model.chat_template, *engine.tokenizer);
  job.prepare = grammar_step(request, engine.model.chat_template, engine.grammars);
  job.events = event_stream(request, engine.model.chat_template);
  // An upstream model's local fallback answering: said in the answer's timings, whatever
  // the surface.
  if (!call.request.fallback_from.empty()) {
    job.events.add_to_timings(dump_json(nlohmann::ordered_json{{"fallback_from", call.request.fallback_from},
                                                               {"fallback_reason", call.request.fallback_reason}}));
  }
  job.writer = std::move(writer);
  job.keep_alive = request.keep_alive;
  job.log_id = std::move(log_id);
  return job;
}

ApiError loading() {
  return unavailable("the model is still loading", "loading");
}

ApiError shutting_down() {
  return unavailable("the server is shutting down", "shutting_down");
}

HttpResponse submit_error_response(const Submitted& submitted, ErrorShape shape) {
  switch (submitted.status) {
    case SubmitStatus::QueueFull:
      return error_response(queue_full(submitted.message.empty() ? "too many requests are waiting" : submitted.message),
                            shape);
    case SubmitStatus::ShuttingDown:
      return error_response(shutting_down(), shape);
    case SubmitStatus::Invalid:
      return error_response(bad_request(submitted.message), shape);
    case SubmitStatus::Accepted:
      break;
  }
  return error_response(internal_error("unexpected submit status"), shape);
}

}  // namespace hearth::ipc
