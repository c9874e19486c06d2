#include "ipc/api/anthropic.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "ipc/api/anthropic_request.h"
#include "ipc/api/anthropic_response.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

std::optional<ApiError> tool_use_unavailable(const ApiRequest& req) {
  if (kAnthropicToolUseReady) return std::nullopt;
  bool history = false;
  for (const ChatMessage& m : req.messages) history = history || !m.tool_calls.empty() || m.role == "tool";
  if (req.tools.empty() && !history) return std::nullopt;
  return bad_request(std::string("tool use is not supported yet: hearth cannot offer ") +
                         (req.tools.empty() ? "tool_use or tool_result blocks" : "'tools'") +
                         " to the model; send the request without them",
                     req.tools.empty() ? "messages" : "tools", "unsupported_parameter");
}

HttpResponse refuse(const ApiError& e) {
  return error_response(e, ErrorShape::Anthropic);
}

// The body as the internal request, or the answer refusing it. A "model" the route resolved
// to the default model ("") names no model: 404, as on OpenAI's routes.
std::variant<ApiRequest, HttpResponse> parse(const Call& call, AnthropicPurpose purpose) {
  const ModelInfo& model = call.engine->model;
  if (const auto name = call.body.find("model"); name != call.body.end() && name->is_string()) {
    const std::string& n = name->get_ref<const std::string&>();
    if (n != model.id && std::find(model.aliases.begin(), model.aliases.end(), n) == model.aliases.end())
      return refuse(unknown_model(n));
  }
  std::variant<ApiRequest, ApiError> parsed = parse_anthropic_request(call.body, purpose);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  if (std::get<ApiRequest>(parsed).chat_options.enable_thinking && !chat_family_thinks(model.chat_template.family)) {
    return refuse(bad_request("'thinking': extended thinking is not supported by '" + model.id +
                                  "': its chat template has no reasoning block; send the request without it",
                              "thinking", "unsupported_value"));
  }
  if (std::optional<ApiError> e = tool_use_unavailable(std::get<ApiRequest>(parsed))) return refuse(*e);
  return std::move(std::get<ApiRequest>(parsed));
}

}  // namespace

RouteResult anthropic_messages(const Call& call) {
  std::variant<ApiRequest, HttpResponse> parsed = parse(call, AnthropicPurpose::Message);
  if (auto* r = std::get_if<HttpResponse>(&parsed)) return std::move(*r);
  const ApiRequest& req = std::get<ApiRequest>(parsed);
  AnthropicMeta meta = new_anthropic_meta(call.engine->model.id, req.max_tokens);
  // The writer is made once the prompt is tokenized: message_start tells its length.
  std::variant<GenerationJob, ApiError> made = make_job(call, req, nullptr, meta.id);
  if (auto* e = std::get_if<ApiError>(&made)) return refuse(*e);
  GenerationJob& job = std::get<GenerationJob>(made);
  meta.prompt_tokens = static_cast<int32_t>(job.request.prompt.size());
  job.writer = anthropic_writer(std::move(meta), req.stream);
  return std::move(job);
}

RouteResult anthropic_count_tokens(const Call& call) {
  std::variant<ApiRequest, HttpResponse> parsed = parse(call, AnthropicPurpose::CountTokens);
  if (auto* r = std::get_if<HttpResponse>(&parsed)) return std::move(*r);
  const EngineRef& engine = *call.engine;
  // Rendered and tokenized as /v1/messages does, but counted whatever the context holds.
  std::variant<GenerationRequest, ApiError> gen = build_generation(
      std::get<ApiRequest>(parsed), *engine.tokenizer, engine.model.chat_template, std::numeric_limits<int32_t>::max());
  if (auto* e = std::get_if<ApiError>(&gen)) return refuse(*e);
  return json_response(200, json{{"input_tokens", std::get<GenerationRequest>(gen).prompt.size()}});
}

}  // namespace hearth::ipc
