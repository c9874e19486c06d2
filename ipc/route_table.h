// Request -> answer, without I/O, in three steps the connection runs in order:
//   1. dispatch(): the listener's gates (Host, Origin), the route of the table that the
//      method and path name, the JSON body parsed, and the model the route serves named;
//   2. the model resolved and, when it is not loaded, loaded — by the connection, off the
//      io thread (or by route() inline, for tests and the fuzzer);
//   3. run_route(): the route's handler, with the model's engine.
// The table itself (route_table.cpp) is read top to bottom: method, path, what the route
// needs before its handler runs, and the handler.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipc/handler.h"

namespace hearth::ipc {

// What a route needs before its handler runs.
enum class Needs {
  Nothing,     // answers while no model is served yet (/health says so itself)
  Host,        // the models' host, no one model (listings, load and unload)
  BodyModel,   // the model the JSON body's "model" names; absent: the default model
  QueryModel,  // the model ?model= (or a DELETE body's "model") names; absent: the default model
};

struct RouteEntry {
  const char* method;  // "GET" (HEAD is answered as GET, without the body), "POST", "DELETE"
  const char* path;    // exact, or ending in "/*": the prefix with a non-empty rest
  ErrorShape errors;   // the API whose error object its errors are written in
  Needs needs;
  bool json_body;  // the body must be a JSON object (else 400), parsed before the handler
  bool generates;  // starts work on a model: refused with 503 once the server stops accepting
  Handler handler;
  // Needs::BodyModel: whether this body needs the model loaded; null: every body does. One
  // that does not reaches the handler with the engine only when the model is loaded already
  // (Ollama's unload request, which must not load a model to unload it).
  bool (*loads_model)(const nlohmann::ordered_json& body) = nullptr;
  // Needs::BodyModel: the handler for a model an upstream serves (upstream.h); null: such a
  // model is not served on this route (404 as any unknown model).
  Handler upstream = nullptr;
};

// Every route, in the order dispatch() tries them.
std::span<const RouteEntry> route_table();

// Whether path matches the entry's path; tail gets what a prefix route matched after it.
bool path_matches(const RouteEntry& route, std::string_view path, std::string_view* tail);

// The error shape of the routes on path (whatever the method; the first route with that
// path): what is answered before a route is found or its handler runs (the listener's gates,
// 405, a body over the limit) is written in it. OpenAI's for a path no route has.
ErrorShape error_shape_of(std::string_view path);

// error_shape_of the path of a request target (its query string dropped).
inline ErrorShape error_shape_of_target(std::string_view target) {
  return error_shape_of(target.substr(0, target.find('?')));
}

// A request that found its route: what step 2 resolves and step 3 runs.
struct Dispatch {
  const RouteEntry* route = nullptr;
  std::string tail;
  std::shared_ptr<const nlohmann::ordered_json> body;  // an object; empty unless route->json_body
  std::optional<std::string> model;                    // the id of the model to resolve (Needs::*Model)
  bool load = true;                                    // load the model when it is not (route->loads_model)
  std::optional<UpstreamModel> upstream;               // the body names an upstream's model: no local one
};

// Step 1. On the TCP listener a request with an Origin not in the allowlist is refused
// (403); an OPTIONS preflight from an allowed one is answered with CORS headers (204); a POST
// whose body is not application/json gets 415, so no browser can send one without a
// preflight. Then 404 (no route), 405 (with Allow), 503 (loading, shutting down), 400 (the
// body), 404 (a model the host does not serve); each in the error shape of the path's routes.
std::variant<HttpResponse, Dispatch> dispatch(const HttpRequest& request, const RouteContext& ctx);

// Step 3: the handler, with the engine of dispatch.model (null when it named none, or when
// it was not loaded and dispatch.load is false) and the time step 2 waited for its load.
RouteResult run_route(const Dispatch& dispatch, const HttpRequest& request, const RouteContext& ctx,
                      std::shared_ptr<const EngineRef> engine, std::chrono::nanoseconds load_wait = {});

// All three steps, loading a model inline (it blocks): for tests and the fuzzer.
RouteResult route(const HttpRequest& request, const RouteContext& ctx);

// "localhost", "127.x.y.z" and "[::1]", each with an optional ":port" (case-insensitive).
bool is_loopback_host(std::string_view host);

}  // namespace hearth::ipc
