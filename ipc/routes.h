// Request -> response, without I/O: which route, which method, whether the engine is
// there, and the JSON of every non-streaming answer. Generation routes come back as a
// GenerationJob (validated and tokenized) for the connection to submit and stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/scheduler/request.h"
#include "ipc/errors.h"
#include "ipc/identity.h"
#include "ipc/model_host.h"
#include "ipc/openai.h"
#include "ipc/server.h"

namespace hearth {
class Scheduler;
struct Submitted;
}  // namespace hearth

namespace hearth::ipc {

class ResponseCounters;

// What set_engine handed over. Immutable once published.
struct EngineRef {
  // Null in an engine that only tokenizes (the HTTP fuzzer's, tests/ipc/http_fuzz.cpp): the
  // routes that read the scheduler's state (GET /api/cache, /metrics' engine part) then
  // answer without it; everything else route() does needs only the tokenizer and n_ctx.
  Scheduler* scheduler = nullptr;
  const Tokenizer* tokenizer = nullptr;
  ModelInfo model;
  int32_t n_ctx = 0;  // tokens a sequence holds (prompt + generated): the scheduler's, at most the model's
  // What the pointers above point into, when someone else does not keep it alive: a
  // ModelHost's loaded model lives as long as the last request that holds its EngineRef.
  std::shared_ptr<const void> owner;
};

// An EngineRef for a running scheduler: n_ctx is the scheduler's, capped by model.n_ctx.
std::shared_ptr<const EngineRef> make_engine_ref(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model,
                                                 std::shared_ptr<const void> owner = nullptr);

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // path, with the query string if any
  std::string host;    // the Host header ("" when absent)
  std::string body;
  std::optional<std::string> origin;  // the Origin header, when sent (browsers send it)
  std::string content_type;           // the Content-Type header ("" when absent)
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;                                         // the Allow header of a 405
  std::vector<std::pair<std::string, std::string>> headers;  // more headers (CORS preflight)
};

struct RouteContext {
  std::shared_ptr<const EngineRef> engine;  // null until set_engine (model loading)
  bool accepting = true;                    // false after stop_accepting: generation gets 503
  bool check_host = false;                  // loopback-only TCP listener: non-loopback Host -> 403
  PeerIdentity peer;                        // who sent it (tcp set for the TCP listener)
  CacheScopeMode scope_mode = CacheScopeMode::User;
  const std::vector<std::string>* allowed_origins = nullptr;  // TCP: browser origins served
  const ResponseCounters* counters = nullptr;
  int64_t open_connections = 0;
  const std::string* models_dir = nullptr;  // GET /api/models lists its files; null: none
  // The models served by name (a daemon serving several); null: only `engine`. With a host,
  // route() sets `engine` per request: the model the body names, else the default model.
  ModelHost* host = nullptr;
};

struct GenerationJob {
  std::shared_ptr<const EngineRef> engine;
  ResponseMeta meta;
  bool stream = false;
  bool warm = false;  // POST /api/cache/warm: never streamed; answered with warm_body()
  GenerationRequest request;
  std::optional<KeepAlive> keep_alive;  // the request's keep_alive, for the host when it ends
};

// A request for a model the host has not loaded: the connection calls host->load(id) on a
// thread of its own (it may take seconds), then routes the request again with that engine.
struct ModelLoad {
  std::string id;
};

// An engine call that may block (it waits for the engine thread between steps): the
// connection runs `run` on a thread of its own, never on the io thread, and sends what it
// returns. engine keeps the EngineRef alive meanwhile.
struct EngineCall {
  std::shared_ptr<const EngineRef> engine;
  std::function<HttpResponse()> run;
};

using RouteResult = std::variant<HttpResponse, GenerationJob, EngineCall, ModelLoad>;

// On the TCP listener, before any route: a request with an Origin not in the allowlist is
// refused (403); an OPTIONS preflight from an allowed one is answered with CORS headers
// (204); a POST whose body is not application/json gets 415, so no browser can send one
// without a preflight. Unix-socket requests pass through.
RouteResult route(const HttpRequest& request, const RouteContext& context);

// The headers a response to an allowed Origin carries (Access-Control-Allow-Origin, Vary).
std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin);

HttpResponse error_response(const ApiError& error);
// The response for a submit() that was not Accepted: 429, 503 or 400.
HttpResponse submit_error_response(const Submitted& submitted);

// "localhost", "127.x.y.z" and "[::1]", each with an optional ":port" (case-insensitive).
bool is_loopback_host(std::string_view host);

}  // namespace hearth::ipc
