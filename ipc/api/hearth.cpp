#include "ipc/api/hearth.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/json_fields.h"
#include "ipc/metrics.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

HttpResponse unavailable_health(const char* status, const ApiError& e) {
  return json_response(503, json{{"status", status}, {"error", json::parse(error_body(e))["error"]}});
}

// Each upstream's state for /health: its breaker, latency and errors.
json upstreams_json(const UpstreamForwarder& upstreams) {
  json out = json::array();
  for (const UpstreamState& s : upstreams.states()) {
    out.push_back({{"name", s.name},
                   {"url", s.url},
                   {"state", s.breaker},
                   {"models", s.n_models},
                   {"requests", s.requests},
                   {"failures", s.failures},
                   {"retries", s.retries},
                   {"in_flight", s.in_flight},
                   {"last_ttfb_ms", s.last_ttfb_ms},
                   {"last_error", s.last_error.empty() ? json(nullptr) : json(s.last_error)}});
  }
  return out;
}

// Prometheus series of each upstream (label upstream="name").
std::string upstream_metrics(const UpstreamForwarder& upstreams) {
  std::string out;
  const auto series = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const UpstreamState& s : upstreams.states())
      out += std::string(name) + "{upstream=\"" + s.name + "\"} " + std::to_string(value(s)) + "\n";
  };
  series("hearth_upstream_up", "gauge", "1 while the upstream's circuit is closed (requests are sent)",
         [](const UpstreamState& s) { return s.breaker == "closed" ? 1 : 0; });
  series("hearth_upstream_requests_total", "counter", "requests forwarded (retries not counted)",
         [](const UpstreamState& s) { return s.requests; });
  series("hearth_upstream_failures_total", "counter", "forwarded requests that got no answer after the retry",
         [](const UpstreamState& s) { return s.failures; });
  series("hearth_upstream_retries_total", "counter", "requests sent a second time on a new connection",
         [](const UpstreamState& s) { return s.retries; });
  series("hearth_upstream_in_flight", "gauge", "requests in flight to the upstream",
         [](const UpstreamState& s) { return s.in_flight; });
  series("hearth_upstream_last_ttfb_seconds", "gauge", "request sent to the answer's header, last success",
         [](const UpstreamState& s) { return s.last_ttfb_ms / 1000.0; });
  return out;
}

}  // namespace

RouteResult health(const Call& call) {
  const RouteContext& ctx = call.ctx;
  if (ctx.host == nullptr || !ctx.host->servable()) return unavailable_health("loading", loading());
  if (!ctx.accepting) return unavailable_health("shutting_down", shutting_down());
  json body{{"status", "ok"}};
  if (ctx.upstreams) body["upstreams"] = upstreams_json(*ctx.upstreams);
  return json_response(200, body);
}

RouteResult metrics(const Call& call) {
  static const ResponseCounters kNone;
  const RouteContext& ctx = call.ctx;
  std::optional<SchedulerStats> stats;
  std::optional<CacheStats> cache;
  std::shared_ptr<const EngineRef> default_engine;
  if (ctx.host != nullptr) {
    if (const std::optional<std::string> id = ctx.host->resolve("")) default_engine = ctx.host->loaded(*id);
  }
  if (default_engine && default_engine->scheduler) {
    stats = default_engine->scheduler->stats();
    cache = default_engine->scheduler->cache_stats();
  }
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = render_metrics(ctx.counters ? *ctx.counters : kNone, stats ? &*stats : nullptr, cache ? &*cache : nullptr,
                          ctx.open_connections);
  if (ctx.host != nullptr) {
    std::vector<ModelSeries> series;
    for (const HostedModel& m : ctx.host->models()) {
      ModelSeries s{m.id, m.loaded, m.memory_bytes, m.in_flight, m.loads, std::nullopt};
      if (const std::shared_ptr<const EngineRef> e = m.loaded ? ctx.host->loaded(m.id) : nullptr; e && e->scheduler)
        s.stats = e->scheduler->stats();
      series.push_back(std::move(s));
    }
    r.body += render_model_metrics(series);
  }
  if (ctx.upstreams) r.body += upstream_metrics(*ctx.upstreams);
  return r;
}

RouteResult tokenize(const Call& call) {
  const json& j = call.body;
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
  const std::vector<int32_t> ids =
      call.engine->tokenizer->encode(content->get<std::string>(), add_special, parse_special);
  return json_response(200, json{{"tokens", ids}});
}

RouteResult detokenize(const Call& call) {
  const json& j = call.body;
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) {
    return error_response(bad_request("'tokens' must be an array of token ids", "tokens", "invalid_type"));
  }
  const Tokenizer& tokenizer = *call.engine->tokenizer;
  const int32_t n_vocab = tokenizer.n_vocab();
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
  return json_response(200, json{{"content", tokenizer.decode(ids)}});
}

}  // namespace hearth::ipc
