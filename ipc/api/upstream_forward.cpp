#include "ipc/api/upstream_forward.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "ipc/api/openai_request.h"
#include "ipc/json_fields.h"
#include "ipc/upstream.h"
#include "ipc/upstream_relay.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

// An answer that is not a stream (an upstream's 4xx, a whole answer) is kept up to this many
// bytes; more is an error.
constexpr size_t kMaxWholeBytes = 64u << 20;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

HttpResponse failure_response(const ForwardFailure& f) {
  return error_response(failure_error(f));
}

// What one forwarded request shares between the upstream's callbacks.
struct Relay {
  Relay(const UpstreamModel& model, bool stream) : model(model), stream(stream) {}
  const UpstreamModel& model;
  bool stream;
  Clock::time_point sent = Clock::now();
  SseRelay sse{model.id, model.upstream, sent};
  int status = 0;
  std::string type;
  bool relaying = false;  // a 200 stream: its events go to the client as they come
  std::string whole;      // anything else: collected
  double first_byte_ms = 0;
};

HttpResponse run_forward(UpstreamForwarder& forwarder, const ForwardCall& fc, const UpstreamModel& model, bool stream,
                         const StreamCall::Emit& emit, const std::atomic<bool>& cancelled, const OnFailure& fall_back) {
  Relay r{model, stream};
  auto on_head = [&](int status, const std::string& type) {
    r.status = status;
    r.type = type;
    r.first_byte_ms = ms_since(r.sent);
    r.relaying = stream && status == 200;
    return true;
  };
  auto on_data = [&](const char* data, size_t n) {
    if (r.relaying) {
      if (std::string out = r.sse.feed(std::string_view(data, n), Clock::now()); !out.empty()) emit(std::move(out));
      return r.sse.broken().empty();
    }
    if (r.whole.size() + n > kMaxWholeBytes) return false;
    r.whole.append(data, n);
    return true;
  };
  std::string broken;
  const std::optional<ForwardFailure> failed = forwarder.forward(fc, on_head, on_data, cancelled, &broken);
  if (failed) {
    LOG_WARN(failed->message);
    if (fall_back(*failed)) {
      LOG_WARN("answering " + model.id + " with the local fallback model " + model.fallback);
      return HttpResponse{};
    }
    return failure_response(*failed);
  }
  if (r.relaying) {
    if (!r.sse.broken().empty()) broken = r.sse.broken();  // ours: more telling than "stopped"
    if (!r.sse.done() && !cancelled.load()) {
      const std::string why =
          "the upstream '" + model.upstream + "' broke off the answer" + (broken.empty() ? "" : ": " + broken);
      LOG_WARN(why);
      emit(SseRelay::broken_event(why));
    }
    return HttpResponse{200, "text/event-stream", "", "", {}};
  }
  if (!broken.empty()) return failure_response({502, "the upstream '" + model.upstream + "' broke off: " + broken});
  HttpResponse out;
  out.status = r.status;
  out.content_type = r.type.empty() ? "application/json" : r.type;
  out.body =
      r.status == 200 ? relay_whole(r.whole, model.id, model.upstream, r.first_byte_ms, ms_since(r.sent)) : r.whole;
  return out;
}

RouteResult forward(Endpoint endpoint, const Call& call) {
  const UpstreamModel& model = *call.upstream;
  std::shared_ptr<UpstreamForwarder> forwarder = call.ctx.upstreams;
  std::variant<OpenAiRequest, ApiError> parsed = parse_openai_request(endpoint, call.body, model.id);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  const OpenAiRequest& req = std::get<OpenAiRequest>(parsed);
  json body = call.body;
  body["model"] = model.remote_id;
  // The upstream's cache isolation follows the caller's: the salt is a keyed hash of the
  // scope (the caller's uid, group or "shared", with its own cache_salt folded in).
  body["cache_salt"] = forwarder->cache_salt(cache_scope(call.ctx.peer, call.ctx.scope_mode, req.cache_salt).key);
  ForwardCall fc{model.upstream, endpoint == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions", body.dump()};
  StreamCall sc;
  sc.stream = req.stream;
  sc.defer_head = true;
  sc.content_type = "text/event-stream";
  const bool stream = req.stream;
  sc.reroute = std::make_shared<std::optional<HttpRequest>>();
  OnFailure fall_back = fallback_to_local(call, sc.reroute);
  sc.run = [forwarder, fc = std::move(fc), model, stream, fall_back = std::move(fall_back)](
               const StreamCall::Emit& emit, const std::atomic<bool>& cancelled) {
    return run_forward(*forwarder, fc, model, stream, emit, cancelled, fall_back);
  };
  return sc;
}

}  // namespace

OnFailure fallback_to_local(const Call& call, std::shared_ptr<std::optional<HttpRequest>> reroute) {
  return [reroute = std::move(reroute), model = *call.upstream, again = call.request,
          body = call.body](const ForwardFailure& failure) mutable {
    if (model.fallback.empty()) return false;
    json local = body;
    local["model"] = model.fallback;
    again.body = dump_json(local);
    again.fallback_from = model.upstream;
    again.fallback_reason = failure.message;
    *reroute = std::move(again);
    return true;
  };
}

ApiError failure_error(const ForwardFailure& f) {
  ApiError e;
  e.status = f.status;
  e.type = "upstream_error";
  e.code = f.status == 504 ? "upstream_timeout" : "upstream_unavailable";
  e.message = f.message;
  return e;
}

RouteResult upstream_chat(const Call& call) {
  return forward(Endpoint::Chat, call);
}

RouteResult upstream_completions(const Call& call) {
  return forward(Endpoint::Completions, call);
}

}  // namespace hearth::ipc
