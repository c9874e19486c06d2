// What a route's handler takes and gives, without I/O: the request as read, the context of
// the connection, the model its route resolved (route_table.h), and its answer — a
// response, a generation to submit and relay, or an engine call to run off the io thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipc/errors.h"
#include "ipc/generation.h"
#include "ipc/http_types.h"
#include "ipc/identity.h"
#include "ipc/model_host.h"
#include "ipc/model_puller.h"
#include "ipc/options.h"
#include "ipc/upstream.h"

namespace hearth {
struct Submitted;
}  // namespace hearth

namespace hearth::ipc {

class ResponseCounters;

// What the connection knows when a request arrives.
struct RouteContext {
  ModelHost* host = nullptr;  // the models served; null until the server has a host (loading)
  bool accepting = true;      // false after stop_accepting: generation gets 503
  bool check_host = false;    // loopback-only TCP listener: non-loopback Host -> 403
  PeerIdentity peer;          // who sent it (tcp set for the TCP listener)
  CacheScopeMode scope_mode = CacheScopeMode::User;
  const std::vector<std::string>* allowed_origins = nullptr;  // TCP: browser origins served
  const ResponseCounters* counters = nullptr;
  int64_t open_connections = 0;
  const std::string* models_dir = nullptr;       // GET /api/models lists its files; null: none
  std::shared_ptr<ModelPuller> puller;           // POST /api/pull downloads through it; null: it cannot
  std::shared_ptr<UpstreamForwarder> upstreams;  // models served elsewhere (upstream.h); null: none
};

// One request as its handler sees it, its model already resolved and loaded.
struct Call {
  const HttpRequest& request;
  const RouteContext& ctx;
  const nlohmann::ordered_json& body;       // the parsed body of a route that takes JSON; else an empty object
  std::shared_ptr<const EngineRef> engine;  // the route's model; null for routes that name none
  std::string_view tail;                    // what a prefix route matched after its prefix ("/v1/models/<tail>")
  std::chrono::nanoseconds load_wait{0};    // how long the request waited for its model to load (0: loaded)
  const UpstreamModel* upstream = nullptr;  // the upstream model the request names (then engine is null)
};

// An engine call that may block (it waits for the engine thread between steps, or loads a
// model): the connection runs `run` on a thread of its own, never on the io thread, and
// sends what it returns. engine keeps the EngineRef alive meanwhile.
struct EngineCall {
  std::shared_ptr<const EngineRef> engine;
  std::function<HttpResponse()> run;
};

// Work that takes minutes and tells how it goes (a model download): the connection runs `run`
// on a thread of its own. Streamed: a 200 with content_type goes out at once, then each piece
// run hands to emit as it comes, then the body of what run returns (its status is not sent);
// else only what run returns is sent. cancelled turns true when the client hangs up, a write
// fails or the server stops; the connection waits for run to return either way.
struct StreamCall {
  using Emit = std::function<void(std::string piece)>;  // any thread; never blocks on the client
  bool stream = true;
  // Streamed: the 200 goes out with the first piece emitted; when run returns having emitted
  // nothing, what it returns is sent as a whole response, its status included (a forwarded
  // request whose upstream gave no answer: 502).
  bool defer_head = false;
  // When run, having emitted nothing, leaves a request here, the connection answers that
  // request (its route dispatched again) instead of sending what run returned: an upstream
  // model's local fallback. Once per request.
  std::shared_ptr<std::optional<HttpRequest>> reroute;
  std::string content_type = "application/x-ndjson";
  std::function<HttpResponse(const Emit& emit, const std::atomic<bool>& cancelled)> run;
};

using RouteResult = std::variant<HttpResponse, GenerationJob, EngineCall, StreamCall>;
using Handler = RouteResult (*)(const Call& call);

// The response for a submit() that was not Accepted: 429, 503 or 400, in the API's error shape.
HttpResponse submit_error_response(const Submitted& submitted, ErrorShape shape = ErrorShape::OpenAi);

// The job for request on the call's model, in the caller's cache scope; the error when the
// prompt cannot be built (build_generation). A request whose grammar holds the answer from
// its first token (a response format, tool_choice required or named) is rendered with
// enable_thinking false: a reasoning block could not be written. A thinking request's
// reasoning_budget becomes the engine's bound on the block (ReasoningLimit).
std::variant<GenerationJob, ApiError> make_job(const Call& call, const ApiRequest& request,
                                               std::unique_ptr<ResponseWriter> writer, std::string log_id);

// 503 "loading" (no model served yet) and "shutting_down" (after stop_accepting).
ApiError loading();
ApiError shutting_down();

}  // namespace hearth::ipc
