// Ollama's and Anthropic's generation routes for a model an upstream serves (issue 45,
// upstream_forward.h): parsed by the surface's own parser, forwarded as OpenAI chat
// (upstream_translate.h), answered by the surface's own ResponseWriter fed the events read
// from the upstream's answer, streamed as it arrives.
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "ipc/api/anthropic_request.h"
#include "ipc/api/anthropic_response.h"
#include "ipc/api/ollama_request.h"
#include "ipc/api/ollama_response.h"
#include "ipc/api/upstream_forward.h"
#include "ipc/api/upstream_surface_relay.h"
#include "ipc/api/upstream_translate.h"
#include "ipc/json_fields.h"
#include "ipc/upstream.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// The StreamCall of one surface's request: body (OpenAI, for the upstream) sent, the answer
// written by the writer make_writer makes.
RouteResult forward(const Call& call, const ApiRequest& req, json body,
                    std::function<std::unique_ptr<ResponseWriter>()> make_writer) {
  const UpstreamModel& model = *call.upstream;
  std::shared_ptr<UpstreamForwarder> forwarder = call.ctx.upstreams;
  body["cache_salt"] = forwarder->cache_salt(cache_scope(call.ctx.peer, call.ctx.scope_mode, req.cache_salt).key);
  ForwardCall fc{model.upstream, req.chat ? "/v1/chat/completions" : "/v1/completions", dump_json(body)};
  StreamCall sc;
  sc.stream = req.stream;
  sc.defer_head = true;
  sc.content_type = make_writer()->content_type();
  sc.reroute = std::make_shared<std::optional<HttpRequest>>();
  sc.run = [forwarder, fc = std::move(fc), model, make_writer = std::move(make_writer),
            fall_back = fallback_to_local(call, sc.reroute)](const StreamCall::Emit& emit,
                                                             const std::atomic<bool>& cancelled) {
    std::unique_ptr<ResponseWriter> writer = make_writer();
    const ErrorShape shape = writer->error_shape();
    SurfaceRelay relay(model.upstream, std::move(writer), emit);
    std::string broken;
    const std::optional<ForwardFailure> failed = forwarder->forward(
        fc, [&](int status, const std::string&) { return relay.head(status); },
        [&](const char* data, size_t n) { return relay.data(data, n); }, cancelled, &broken);
    if (!failed) return relay.finish(broken, cancelled.load());
    LOG_WARN(failed->message);
    if (!fall_back(*failed)) return error_response(failure_error(*failed), shape);
    LOG_WARN("answering " + model.id + " with the local fallback model " + model.fallback);
    return HttpResponse{};
  };
  return sc;
}

RouteResult ollama(OllamaEndpoint endpoint, const Call& call) {
  constexpr ErrorShape kShape = ErrorShape::Ollama;
  std::variant<OllamaRequest, ApiError> parsed = parse_ollama_request(endpoint, call.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e, kShape);
  const OllamaRequest& req = std::get<OllamaRequest>(parsed);
  const std::string name = req.model;
  if (req.load_only) {  // nothing to load here: the upstream keeps its models
    const bool unload = req.keep_alive && req.keep_alive->duration && req.keep_alive->duration->count() == 0;
    return json_response(200, ollama_load_answer(endpoint, name, unload ? "unload" : "load"));
  }
  OllamaMeta meta;
  meta.endpoint = endpoint;
  meta.model = name;
  meta.logprobs = req.logprobs;  // asked of the upstream as OpenAI's logprobs (upstream_translate.h)
  const bool stream = req.stream;
  return forward(call, req, openai_upstream_body(req, call.upstream->remote_id, req.think),
                 [meta, stream] { return ollama_writer(meta, stream); });
}

}  // namespace

RouteResult upstream_ollama_chat(const Call& call) {
  return ollama(OllamaEndpoint::Chat, call);
}

RouteResult upstream_ollama_generate(const Call& call) {
  return ollama(OllamaEndpoint::Generate, call);
}

RouteResult upstream_anthropic_messages(const Call& call) {
  std::variant<ApiRequest, ApiError> parsed = parse_anthropic_request(call.body, AnthropicPurpose::Message);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e, ErrorShape::Anthropic);
  const ApiRequest& req = std::get<ApiRequest>(parsed);
  // The prompt's length is the upstream's to know: message_start waits for its first chunk
  // and says the count when that chunk has usage (continuous_usage_stats), else 0; then
  // message_delta's usage has it (SurfaceRelay).
  AnthropicMeta meta = new_anthropic_meta(call.upstream->id, req.max_tokens);
  const bool stream = req.stream;
  return forward(call, req, openai_upstream_body(req, call.upstream->remote_id, req.chat_options.enable_thinking),
                 [meta, stream] { return anthropic_writer(meta, stream); });
}

}  // namespace hearth::ipc
