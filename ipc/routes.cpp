#include "ipc/routes.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/cache_routes.h"
#include "ipc/host_routes.h"
#include "ipc/metrics.h"
#include "ipc/models_route.h"

namespace hearth::ipc {

using json = nlohmann::json;

namespace {

enum class Route {
  ChatCompletions,
  Completions,
  Models,
  Model,
  Health,
  Metrics,
  Tokenize,
  Detokenize,
  Cache,
  CacheWarm,
  InstalledModels,
  Ps,
  Load,
  Unload
};

struct RouteSpec {
  Route route;
  const char* methods;  // the methods allowed, as an Allow header lists them
};

// Whether method is one of spec's (HEAD counts as GET: the connection leaves the body out).
bool allows(const RouteSpec& spec, const std::string& method) {
  const std::string_view want = method == "HEAD" ? std::string_view("GET") : std::string_view(method);
  std::string_view list = spec.methods;
  while (!list.empty()) {
    const size_t comma = list.find(", ");
    if (list.substr(0, comma) == want) return true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 2);
  }
  return false;
}

// Known paths; /v1/models/<id> is matched separately.
std::optional<RouteSpec> find_route(std::string_view path) {
  if (path == "/v1/chat/completions") return RouteSpec{Route::ChatCompletions, "POST"};
  if (path == "/v1/completions") return RouteSpec{Route::Completions, "POST"};
  if (path == "/v1/models") return RouteSpec{Route::Models, "GET"};
  if (path.size() > 11 && path.substr(0, 11) == "/v1/models/") return RouteSpec{Route::Model, "GET"};
  if (path == "/health") return RouteSpec{Route::Health, "GET"};
  if (path == "/metrics") return RouteSpec{Route::Metrics, "GET"};
  if (path == "/api/tokenize") return RouteSpec{Route::Tokenize, "POST"};
  if (path == "/api/detokenize") return RouteSpec{Route::Detokenize, "POST"};
  if (path == "/api/cache") return RouteSpec{Route::Cache, "GET, DELETE"};
  if (path == "/api/cache/warm") return RouteSpec{Route::CacheWarm, "POST"};
  if (path == "/api/models") return RouteSpec{Route::InstalledModels, "GET"};
  if (path == "/api/ps") return RouteSpec{Route::Ps, "GET"};
  if (path == "/api/load") return RouteSpec{Route::Load, "POST"};
  if (path == "/api/unload") return RouteSpec{Route::Unload, "POST"};
  return std::nullopt;
}

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

ApiError loading() {
  return unavailable("the model is still loading", "loading");
}
ApiError shutting_down() {
  return unavailable("the server is shutting down", "shutting_down");
}

HttpResponse health(const RouteContext& ctx) {
  if (ctx.host ? !ctx.host->servable() : !ctx.engine) {
    const ApiError e = loading();
    return json_response(503, json{{"status", "loading"}, {"error", json::parse(error_body(e))["error"]}});
  }
  if (!ctx.accepting) {
    const ApiError e = shutting_down();
    return json_response(503, json{{"status", "shutting_down"}, {"error", json::parse(error_body(e))["error"]}});
  }
  return json_response(200, json{{"status", "ok"}});
}

HttpResponse metrics(const RouteContext& ctx) {
  static const ResponseCounters kNone;
  std::optional<SchedulerStats> stats;
  std::optional<CacheStats> cache;
  if (ctx.engine && ctx.engine->scheduler) {
    stats = ctx.engine->scheduler->stats();
    cache = ctx.engine->scheduler->cache_stats();
  }
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = render_metrics(ctx.counters ? *ctx.counters : kNone, stats ? &*stats : nullptr, cache ? &*cache : nullptr,
                          ctx.open_connections);
  if (ctx.host) {
    std::vector<ModelSeries> series;
    for (const HostedModel& m : ctx.host->models()) {
      ModelSeries s{m.id, m.loaded, m.memory_bytes, m.in_flight, m.loads, std::nullopt};
      if (const std::shared_ptr<const EngineRef> e = m.loaded ? ctx.host->loaded(m.id) : nullptr; e && e->scheduler)
        s.stats = e->scheduler->stats();
      series.push_back(std::move(s));
    }
    r.body += render_model_metrics(series);
  }
  return r;
}

HttpResponse tokenize(const EngineRef& engine, const std::string& body) {
  json j;
  if (auto e = parse_json(body, &j)) return error_response(*e);
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) {
    return error_response(bad_request("'content' must be a string", "content", "invalid_type"));
  }
  // Defaults as llama.cpp's /tokenize: no BOS/EOS added, special-token text parsed into its
  // ids ("<|im_start|>" -> one id); "parse_special": false tokenizes it as plain text.
  bool add_special = false, parse_special = true;
  for (auto [key, out] : {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean())
      return error_response(bad_request(std::string("'") + key + "' must be a boolean", key, "invalid_type"));
    *out = it->get<bool>();
  }
  const std::vector<int32_t> ids = engine.tokenizer->encode(content->get<std::string>(), add_special, parse_special);
  return json_response(200, json{{"tokens", ids}});
}

HttpResponse detokenize(const EngineRef& engine, const std::string& body) {
  json j;
  if (auto e = parse_json(body, &j)) return error_response(*e);
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) {
    return error_response(bad_request("'tokens' must be an array of token ids", "tokens", "invalid_type"));
  }
  const int32_t n_vocab = engine.tokenizer->n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) {
      return error_response(bad_request("'tokens' must hold integers", "tokens", "invalid_type"));
    }
    // Unsigned values above INT64_MAX read as negative here and fail the range check too.
    const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                              : t.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return error_response(bad_request(
          "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")",
          "tokens"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return json_response(200, json{{"content", engine.tokenizer->decode(ids)}});
}

// /api/tokenize and /api/detokenize with the tokenizer of the model the body names (a
// host's default model when it names none), loaded first when it is not.
RouteResult tokenize_route(Route route, const RouteContext& ctx, const std::string& body) {
  std::shared_ptr<const EngineRef> engine = ctx.engine;
  if (ctx.host) {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    EngineChoice chosen = engine_for(ctx, j.is_object() ? j : json::object());
    if (auto* r = std::get_if<RouteResult>(&chosen)) return std::move(*r);
    engine = std::get<std::shared_ptr<const EngineRef>>(std::move(chosen));
  }
  return route == Route::Tokenize ? tokenize(*engine, body) : detokenize(*engine, body);
}

// With a host, /api/cache for the model the query or a DELETE's body names: routed again
// with that model's engine (loaded first when it is not), or 404 for a name the host does
// not serve. nullopt: the context's engine serves it (no name, or the name is its model's).
std::optional<RouteResult> cache_route_for_named_model(const HttpRequest& request, const RouteContext& ctx) {
  std::optional<std::string> name = query_param(request.target, "model");
  if (!name && request.method == "DELETE" && !request.body.empty()) {
    const json j = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("model") && j["model"].is_string()) name = j["model"].get<std::string>();
  }
  if (!name || name->empty()) return std::nullopt;
  const std::optional<std::string> id = ctx.host->resolve(*name);
  if (!id) return RouteResult{error_response(unknown_model(*name))};
  if (ctx.engine && ctx.engine->model.id == *id) return std::nullopt;
  RouteContext with_model = ctx;
  with_model.engine = ctx.host->loaded(*id);
  if (!with_model.engine) return RouteResult{ModelLoad{*id}};
  return route(request, with_model);
}

RouteResult generation(Endpoint endpoint, const RouteContext& ctx, const std::string& body) {
  json j;
  if (auto e = parse_json(body, &j)) return error_response(*e);
  EngineChoice chosen = engine_for(ctx, j);
  if (auto* r = std::get_if<RouteResult>(&chosen)) return std::move(*r);
  const std::shared_ptr<const EngineRef> ref = std::get<std::shared_ptr<const EngineRef>>(std::move(chosen));
  const EngineRef& engine = *ref;
  std::variant<OpenAiRequest, ApiError> parsed =
      parse_openai_request(endpoint, j, engine.model.id, engine.model.aliases);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  const OpenAiRequest& req = std::get<OpenAiRequest>(parsed);
  std::variant<GenerationRequest, ApiError> gen =
      build_generation(req, *engine.tokenizer, engine.model.chat_template, engine.n_ctx);
  if (auto* e = std::get_if<ApiError>(&gen)) return error_response(*e);
  GenerationJob job;
  job.engine = ref;
  job.meta = new_response_meta(endpoint, engine.model.id, req.stream && req.include_usage);
  job.stream = req.stream;
  job.request = std::move(std::get<GenerationRequest>(gen));
  job.request.scope = cache_scope(ctx.peer, ctx.scope_mode, req.cache_salt);
  job.keep_alive = req.keep_alive;
  return job;
}

// The media type of a Content-Type value, lower-cased, without parameters.
std::string media_type(std::string_view content_type) {
  std::string t(content_type.substr(0, content_type.find(';')));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

// What the TCP listener answers before routing (see route()); nullopt: go on.
std::optional<HttpResponse> browser_gate(const HttpRequest& request, const RouteContext& ctx) {
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& allowed = ctx.allowed_origins ? *ctx.allowed_origins : kNone;
  if (request.origin && !origin_allowed(*request.origin, allowed)) {
    return error_response(forbidden("Origin '" + *request.origin +
                                    "' is not allowed: hearth answers web pages only from the origins listed in "
                                    "allowed_origins (empty by default)"));
  }
  if (request.method == "OPTIONS" && request.origin) {
    HttpResponse r;
    r.status = 204;
    r.content_type = "text/plain";
    r.headers = cors_headers(*request.origin);
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    r.headers.emplace_back("Access-Control-Allow-Headers", "Content-Type, Authorization");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    return r;
  }
  if (request.method == "POST" && media_type(request.content_type) != "application/json") {
    ApiError e =
        bad_request("POST bodies must be sent with Content-Type: application/json (got '" + request.content_type + "')",
                    "", "unsupported_media_type");
    e.status = 415;
    return error_response(e);
  }
  return std::nullopt;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

json model_object(const ModelInfo& m) {
  return json{{"id", m.id},
              {"object", "model"},
              {"created", m.created},
              {"owned_by", "hearth"},
              {"meta",
               {{"arch", m.arch},
                {"backend", m.backend},
                {"n_ctx", m.n_ctx},
                {"chat_template", chat_family_name(m.chat_template.family)},
                {"aliases", m.aliases}}}};
}

std::shared_ptr<const EngineRef> make_engine_ref(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model,
                                                 std::shared_ptr<const void> owner) {
  auto ref = std::make_shared<EngineRef>();
  ref->scheduler = scheduler;
  ref->tokenizer = tokenizer;
  ref->model = std::move(model);
  ref->n_ctx = scheduler->options().n_ctx;
  if (ref->model.n_ctx > 0) ref->n_ctx = std::min(ref->n_ctx, ref->model.n_ctx);
  ref->owner = std::move(owner);
  return ref;
}

HttpResponse error_response(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = error_body(error);
  return r;
}

HttpResponse submit_error_response(const Submitted& submitted) {
  switch (submitted.status) {
    case SubmitStatus::QueueFull:
      return error_response(
          queue_full(submitted.message.empty() ? "too many requests are waiting" : submitted.message));
    case SubmitStatus::ShuttingDown:
      return error_response(shutting_down());
    case SubmitStatus::Invalid:
      return error_response(bad_request(submitted.message));
    case SubmitStatus::Accepted:
      break;
  }
  return error_response(internal_error("unexpected submit status"));
}

bool is_loopback_host(std::string_view host) {
  std::string h(host);
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string name;
  if (!h.empty() && h[0] == '[') {
    const size_t close = h.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = h.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || !all_digits(std::string_view(rest).substr(1)))) return false;
    in6_addr a6{};
    return inet_pton(AF_INET6, h.substr(1, close - 1).c_str(), &a6) == 1 &&
           std::memcmp(&a6, &in6addr_loopback, sizeof a6) == 0;
  }
  const size_t colon = h.find(':');
  name = h.substr(0, colon);
  if (colon != std::string::npos && !all_digits(std::string_view(h).substr(colon + 1))) return false;
  if (name == "localhost" || name == "localhost.") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, name.c_str(), &a4) != 1) return false;
  return (ntohl(a4.s_addr) >> 24) == 127;
}

std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) {
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

RouteResult route(const HttpRequest& request, const RouteContext& ctx) {
  if (ctx.check_host && !is_loopback_host(request.host)) {
    return error_response(forbidden("Host '" + request.host +
                                    "' is not a loopback name or address; this listener serves local clients only"));
  }
  if (ctx.peer.tcp) {
    if (std::optional<HttpResponse> r = browser_gate(request, ctx)) return *r;
  }
  std::string_view path = request.target;
  if (size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const std::optional<RouteSpec> spec = find_route(path);
  if (!spec) {
    return error_response(not_found("Unknown route: " + request.method + " " + std::string(path)));
  }
  if (!allows(*spec, request.method)) {
    HttpResponse r = error_response(
        method_not_allowed(request.method + " is not allowed on " + std::string(path) + "; use " + spec->methods));
    r.allow = spec->methods;
    return r;
  }
  const bool tokenizes = spec->route == Route::Tokenize || spec->route == Route::Detokenize;
  const bool chooses = spec->route == Route::ChatCompletions || spec->route == Route::Completions ||
                       spec->route == Route::CacheWarm || tokenizes;
  if (ctx.host && !ctx.engine && !chooses) {
    // The routes that do not name a model serve the host's default one, when it is loaded;
    // the context holds it only while this request is routed.
    RouteContext with_default = ctx;
    if (const std::optional<std::string> id = ctx.host->resolve("")) with_default.engine = ctx.host->loaded(*id);
    if (with_default.engine) return route(request, with_default);
  }
  switch (spec->route) {
    case Route::Health:
      return health(ctx);
    case Route::Metrics:
      return metrics(ctx);
    case Route::InstalledModels:
      return installed_models_response(ctx);
    default:
      break;
  }
  if (ctx.host) {
    switch (spec->route) {
      case Route::Models:
        return hosted_models_response(*ctx.host);
      case Route::Model:
        return hosted_model_response(*ctx.host, path.substr(11));
      case Route::Ps:
        return ps_response(*ctx.host);
      case Route::Load:
        if (!ctx.accepting) return error_response(shutting_down());
        return load_route(*ctx.host, request.body);
      case Route::Unload:
        return unload_route(*ctx.host, request.body);
      case Route::ChatCompletions:
      case Route::Completions:
      case Route::CacheWarm:
      case Route::Tokenize:
      case Route::Detokenize:
        break;  // they choose the model their body names
      case Route::Cache:
        if (std::optional<RouteResult> other = cache_route_for_named_model(request, ctx)) return std::move(*other);
        [[fallthrough]];
      default:
        // The other engine routes serve the default model: loaded first when it is not.
        if (!ctx.engine) return load_default_model(*ctx.host);
    }
  } else if (spec->route == Route::Ps || spec->route == Route::Load || spec->route == Route::Unload) {
    return error_response(not_found("this server serves one model; " + std::string(path) + " needs a model host"));
  } else if (!ctx.engine) {
    return error_response(loading());
  }
  if (tokenizes) return tokenize_route(spec->route, ctx, request.body);
  if (chooses) {
    if (!ctx.accepting) return error_response(shutting_down());
    if (spec->route == Route::CacheWarm) return cache_warm(ctx, request.body);
    return generation(spec->route == Route::ChatCompletions ? Endpoint::Chat : Endpoint::Completions, ctx,
                      request.body);
  }
  const EngineRef& engine = *ctx.engine;
  switch (spec->route) {
    case Route::Models:
      return json_response(200, json{{"object", "list"}, {"data", json::array({model_object(engine.model)})}});
    case Route::Model: {
      const std::string_view id = path.substr(11);
      if (!engine.model.answers_to(id)) {
        return error_response(not_found("The model '" + std::string(id) + "' does not exist", "model_not_found"));
      }
      return json_response(200, model_object(engine.model));
    }
    case Route::Cache:
      if (request.method == "DELETE") return cache_clear(ctx, request);
      return cache_stats_response(ctx);
    default:
      break;
  }
  return error_response(internal_error("unhandled route"));
}

}  // namespace hearth::ipc
