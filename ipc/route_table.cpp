#include "ipc/route_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ipc/api/anthropic.h"
#include "ipc/api/hearth.h"
#include "ipc/api/ollama.h"
#include "ipc/api/ollama_request.h"
#include "ipc/api/openai.h"
#include "ipc/api/upstream_forward.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr bool kJson = true, kNoBody = false;
constexpr ErrorShape kOpenAi = ErrorShape::OpenAi, kOllama = ErrorShape::Ollama, kAnthropic = ErrorShape::Anthropic;
constexpr bool kGenerates = true, kReads = false;

// clang-format off
constexpr RouteEntry kRoutes[] = {
  // method   path                    errors  needs               body     work        handler
  // OpenAI's API (api/openai.h)
  {"POST",   "/v1/chat/completions", kOpenAi, Needs::BodyModel,   kJson,   kGenerates, openai_chat, nullptr, upstream_chat},
  {"POST",   "/v1/completions",      kOpenAi, Needs::BodyModel,   kJson,   kGenerates, openai_completions, nullptr, upstream_completions},
  {"GET",    "/v1/models",           kOpenAi, Needs::Host,        kNoBody, kReads,     openai_models},
  {"GET",    "/v1/models/*",         kOpenAi, Needs::Host,        kNoBody, kReads,     openai_model},
  // Anthropic's API (api/anthropic.h)
  {"POST",   "/v1/messages",              kAnthropic, Needs::BodyModel, kJson, kGenerates, anthropic_messages, nullptr, upstream_anthropic_messages},
  {"POST",   "/v1/messages/count_tokens", kAnthropic, Needs::BodyModel, kJson, kReads,     anthropic_count_tokens},
  // hearth's own (api/hearth.h)
  {"GET",    "/health",              kOpenAi, Needs::Nothing,     kNoBody, kReads,     health},
  {"GET",    "/metrics",             kOpenAi, Needs::Nothing,     kNoBody, kReads,     metrics},
  {"POST",   "/api/tokenize",        kOpenAi, Needs::BodyModel,   kJson,   kReads,     tokenize},
  {"POST",   "/api/detokenize",      kOpenAi, Needs::BodyModel,   kJson,   kReads,     detokenize},
  {"GET",    "/api/cache",           kOpenAi, Needs::QueryModel,  kNoBody, kReads,     cache_stats},
  {"DELETE", "/api/cache",           kOpenAi, Needs::QueryModel,  kNoBody, kReads,     cache_clear},
  {"POST",   "/api/cache/warm",      kOpenAi, Needs::BodyModel,   kJson,   kGenerates, cache_warm},
  {"GET",    "/api/models",          kOpenAi, Needs::Nothing,     kNoBody, kReads,     installed_models},
  {"POST",   "/api/load",            kOpenAi, Needs::Host,        kJson,   kGenerates, load_model},
  {"POST",   "/api/unload",          kOpenAi, Needs::Host,        kJson,   kReads,     unload_model},
  // Ollama's API (api/ollama.h); /api/ps lists hearth's fields too. An unload request (nothing
  // to generate, keep_alive 0) does not load the model it unloads.
  {"GET",    "/",                    kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_root},
  {"POST",   "/api/chat",            kOllama, Needs::BodyModel,   kJson,   kGenerates, ollama_chat, ollama_loads_model, upstream_ollama_chat},
  {"POST",   "/api/generate",        kOllama, Needs::BodyModel,   kJson,   kGenerates, ollama_generate, ollama_loads_model, upstream_ollama_generate},
  {"GET",    "/api/tags",            kOllama, Needs::Host,        kNoBody, kReads,     ollama_tags},
  {"POST",   "/api/show",            kOllama, Needs::Host,        kJson,   kReads,     ollama_show},
  {"GET",    "/api/ps",              kOllama, Needs::Host,        kNoBody, kReads,     ollama_ps},
  {"GET",    "/api/version",         kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_version},
  {"POST",   "/api/pull",            kOllama, Needs::Host,        kJson,   kReads,     ollama_pull},
  {"DELETE", "/api/delete",          kOllama, Needs::Host,        kJson,   kReads,     ollama_delete},
  {"POST",   "/api/copy",            kOllama, Needs::Nothing,     kJson,   kReads,     ollama_copy},
  {"POST",   "/api/embed",           kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_not_implemented},
  {"POST",   "/api/embeddings",      kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_not_implemented},
  {"POST",   "/api/create",          kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_not_implemented},
  {"POST",   "/api/push",            kOllama, Needs::Nothing,     kNoBody, kReads,     ollama_not_implemented},
};
// clang-format on

// The media type of a Content-Type value, lower-cased, without parameters.
std::string media_type(std::string_view content_type) {
  std::string t(content_type.substr(0, content_type.find(';')));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

// What the TCP listener answers before routing (see dispatch()); nullopt: go on.
std::optional<HttpResponse> browser_gate(const HttpRequest& request, const RouteContext& ctx, ErrorShape shape) {
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& allowed = ctx.allowed_origins ? *ctx.allowed_origins : kNone;
  if (request.origin && !origin_allowed(*request.origin, allowed)) {
    return error_response(forbidden("Origin '" + *request.origin +
                                    "' is not allowed: hearth answers web pages only from the origins listed in "
                                    "allowed_origins (empty by default)"),
                          shape);
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
    return error_response(e, shape);
  }
  return std::nullopt;
}

// The route for method and path, or the answer when there is none: 404, or 405 listing the
// methods the path has.
std::variant<HttpResponse, const RouteEntry*> find_route(const std::string& method, std::string_view path,
                                                         std::string* tail, ErrorShape shape) {
  const std::string_view want = method == "HEAD" ? std::string_view("GET") : std::string_view(method);
  std::string allow;
  for (const RouteEntry& r : kRoutes) {
    std::string_view rest;
    if (!path_matches(r, path, &rest)) continue;
    if (r.method == want) {
      *tail = std::string(rest);
      return &r;
    }
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + std::string(r.method);
  }
  if (allow.empty()) return error_response(not_found("Unknown route: " + method + " " + std::string(path)), shape);
  HttpResponse r =
      error_response(method_not_allowed(method + " is not allowed on " + std::string(path) + "; use " + allow), shape);
  r.allow = allow;
  return r;
}

// The name of the model a request asks for: "" (the default) when it names none. A "model"
// that is not a string is left to the handler's validation.
std::string named_model(const RouteEntry& route, const HttpRequest& request, const json& body) {
  if (route.needs == Needs::QueryModel) {
    if (std::optional<std::string> q = query_param(request.target, "model")) return *q;
    if (request.method != "DELETE" || request.body.empty()) return "";
    const json j = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("model") && j["model"].is_string()) return j["model"].get<std::string>();
    return "";
  }
  const auto it = body.find("model");
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::span<const RouteEntry> route_table() {
  return kRoutes;
}

ErrorShape error_shape_of(std::string_view path) {
  std::string_view tail;
  for (const RouteEntry& r : kRoutes)
    if (path_matches(r, path, &tail)) return r.errors;
  return ErrorShape::OpenAi;
}

bool path_matches(const RouteEntry& route, std::string_view path, std::string_view* tail) {
  const std::string_view p = route.path;
  if (p.size() >= 2 && p.substr(p.size() - 2) == "/*") {
    const std::string_view prefix = p.substr(0, p.size() - 1);
    if (path.size() <= prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
    *tail = path.substr(prefix.size());
    return true;
  }
  *tail = {};
  return path == p;
}

std::variant<HttpResponse, Dispatch> dispatch(const HttpRequest& request, const RouteContext& ctx) {
  std::string_view path = request.target;
  if (size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  const ErrorShape shape = error_shape_of(path);
  if (ctx.check_host && !is_loopback_host(request.host)) {
    return error_response(forbidden("Host '" + request.host +
                                    "' is not a loopback name or address; this listener serves local clients only"),
                          shape);
  }
  if (ctx.peer.tcp) {
    if (std::optional<HttpResponse> r = browser_gate(request, ctx, shape)) return *r;
  }
  Dispatch d;
  std::variant<HttpResponse, const RouteEntry*> found = find_route(request.method, path, &d.tail, shape);
  if (auto* r = std::get_if<HttpResponse>(&found)) return std::move(*r);
  d.route = std::get<const RouteEntry*>(found);
  const RouteEntry& route = *d.route;
  if (route.needs != Needs::Nothing && ctx.host == nullptr) return error_response(loading(), route.errors);
  if (route.generates && !ctx.accepting) return error_response(shutting_down(), route.errors);
  auto body = std::make_shared<json>(json::object());
  if (route.json_body) {
    if (std::optional<ApiError> e = parse_json(request.body, body.get())) return error_response(*e, route.errors);
  }
  d.body = std::move(body);
  if (route.needs == Needs::BodyModel || route.needs == Needs::QueryModel) {
    const std::string name = named_model(route, request, *d.body);
    if (route.upstream != nullptr && ctx.upstreams != nullptr && !name.empty()) {
      d.upstream = ctx.upstreams->find(name);
      if (d.upstream) return d;
    }
    d.model = ctx.host->resolve(name);
    if (!d.model) {
      return error_response(name.empty() ? unavailable("no model can be served", "no_model") : unknown_model(name),
                            route.errors);
    }
    d.load = route.needs != Needs::BodyModel || route.loads_model == nullptr || route.loads_model(*d.body);
  }
  return d;
}

RouteResult run_route(const Dispatch& d, const HttpRequest& request, const RouteContext& ctx,
                      std::shared_ptr<const EngineRef> engine, std::chrono::nanoseconds load_wait) {
  if (d.upstream) return d.route->upstream(Call{request, ctx, *d.body, nullptr, d.tail, {}, &*d.upstream});
  return d.route->handler(Call{request, ctx, *d.body, std::move(engine), d.tail, load_wait});
}

RouteResult route(const HttpRequest& request, const RouteContext& ctx) {
  std::variant<HttpResponse, Dispatch> d = dispatch(request, ctx);
  if (auto* r = std::get_if<HttpResponse>(&d)) return std::move(*r);
  const Dispatch& dispatched = std::get<Dispatch>(d);
  std::shared_ptr<const EngineRef> engine;
  std::chrono::nanoseconds load_wait{0};
  if (dispatched.model) engine = ctx.host->loaded(*dispatched.model);
  if (dispatched.model && !engine && dispatched.load) {
    const auto t0 = std::chrono::steady_clock::now();
    ModelHost::Loaded loaded = ctx.host->load(*dispatched.model);
    if (auto* e = std::get_if<HostError>(&loaded)) return error_response(host_error(*e), dispatched.route->errors);
    engine = std::get<std::shared_ptr<const EngineRef>>(std::move(loaded));
    load_wait = std::chrono::steady_clock::now() - t0;
  }
  return run_route(dispatched, request, ctx, std::move(engine), load_wait);
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

}  // namespace hearth::ipc
