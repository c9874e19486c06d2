#include "ipc/api/hearth_cache.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/api/openai_request.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// Content of the extra turn chat_prefix_segments renders: control characters and a name
// no template writes, so finding it again tells exactly where that turn's content begins.
constexpr std::string_view kSentinel = "\x1ehearth-prefix-sentinel\x1e";

// A warm request's answer: counts, never text; whole, never streamed.
class WarmWriter final : public ResponseWriter {
 public:
  explicit WarmWriter(std::string model_id) : model_id_(std::move(model_id)) {}
  bool streamed() const override { return false; }
  std::string write(const ApiEvent& ev) override {
    if (ev.kind == ApiEvent::Kind::Done) response_ = warm_response(model_id_, ev);
    if (ev.kind == ApiEvent::Kind::Error) response_ = error_response(ev.error);
    return "";
  }
  HttpResponse response() override { return response_; }

 private:
  std::string model_id_;
  HttpResponse response_;
};

double rate(uint64_t hits, uint64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(total);
}

// The tokens a warm request prefills: the chat prefix, or the completion prompt.
std::variant<std::vector<int32_t>, ApiError> warm_tokens(const EngineRef& engine, const OpenAiRequest& req,
                                                         int32_t n_ctx) {
  if (!req.chat) {
    std::variant<GenerationRequest, ApiError> gen =
        build_generation(req, *engine.tokenizer, engine.model.chat_template, n_ctx);
    if (auto* e = std::get_if<ApiError>(&gen)) return *e;
    return std::move(std::get<GenerationRequest>(gen).prompt);
  }
  std::variant<std::vector<ChatSegment>, ApiError> segments =
      chat_prefix_segments(engine.model.chat_template, req.messages);
  if (auto* e = std::get_if<ApiError>(&segments)) return *e;
  std::vector<int32_t> tokens = engine.tokenizer->encode_segments(std::get<std::vector<ChatSegment>>(segments));
  if (tokens.empty()) return bad_request("the chat prefix is empty", "messages");
  if (static_cast<int64_t>(tokens.size()) >= n_ctx) {
    return bad_request(
        "the chat prefix is " + std::to_string(tokens.size()) + " tokens; the context holds " + std::to_string(n_ctx),
        "messages", "context_length_exceeded");
  }
  return tokens;
}

json stats_body(const CacheStats& s, const std::string& model_id) {
  const storage::StoreStats& d = s.disk;
  return json{{"model", model_id},
              {"fingerprint", s.model_fingerprint},
              {"memory",
               {{"blocks", s.memory_blocks},
                {"tokens", s.memory_tokens},
                {"bytes", s.memory_bytes},
                {"capacity_bytes", s.memory_capacity_bytes},
                {"lookups", s.memory_lookups},
                {"hits", s.memory_hits},
                {"hit_tokens", s.memory_hit_tokens},
                {"hit_rate", rate(s.memory_hits, s.memory_lookups)},
                {"evictions", s.memory_evictions}}},
              {"disk",
               {{"enabled", s.disk_enabled},
                {"dir", s.disk_dir},
                {"lookups", s.disk_lookups},
                {"hit_tokens", s.disk_hit_tokens},
                {"entries", d.entries},
                {"bytes", d.bytes},
                {"budget_bytes", d.budget},
                {"share_bytes", d.share_bytes},
                {"user_max_bytes", d.user_max_bytes},
                {"model_entries", d.model_entries},
                {"model_bytes", d.model_bytes},
                {"hits", d.hits},
                {"misses", d.misses},
                {"hit_rate", rate(d.hits, d.hits + d.misses)},
                {"restored_bytes", d.restored_bytes},
                {"written_chunks", d.written_chunks},
                {"written_bytes", d.written_bytes},
                {"evictions", d.evictions},
                {"checksum_failures", d.checksum_failures},
                {"dropped_writes", d.dropped_writes},
                {"write_errors", d.write_errors},
                {"queue_depth", d.queue_depth},
                {"writing", s.disk_enabled && d.writing},
                {"stopped_reason", d.stopped_reason.empty() ? json(nullptr) : json(d.stopped_reason)}}},
              {"prefilled_tokens", s.prefilled_tokens},
              {"kv",
               {{"type", s.kv_type},
                {"bytes_per_token",
                 {{"memory", s.kv_bytes_per_token_memory},
                  {"disk", s.disk_enabled ? json(s.kv_bytes_per_token_disk) : json(nullptr)}}}}}};
}

// A user's bytes in the whole directory (every model's chunks), counted against the share.
uint64_t directory_bytes(const storage::StoreStats& d, uint32_t uid) {
  const auto it = d.directory_owner_bytes.find(uid);
  return it == d.directory_owner_bytes.end() ? 0 : it->second;
}

json owner_json(uint32_t uid, const OwnerCacheUsage& o, const storage::StoreStats& d) {
  return json{{"uid", uid},
              {"memory_blocks", o.memory_blocks},
              {"memory_tokens", o.memory_tokens},
              {"memory_bytes", o.memory_bytes},
              {"disk_entries", o.disk_entries},
              {"disk_bytes", o.disk_bytes},
              {"disk_directory_bytes", directory_bytes(d, uid)}};
}

}  // namespace

json cache_stats_json(const CacheStats& totals, const std::string& model_id, const PeerIdentity& peer,
                      CacheScopeMode mode) {
  const bool admin = is_cache_admin(peer);
  const uint32_t uid = cache_owner(peer);
  CacheStats s = totals;
  storage::StoreStats& d = s.disk;
  if (!admin) {
    // Only the caller's own entries: another user's prompts are not even counted.
    const auto it = s.owners.find(uid);
    const OwnerCacheUsage own = it == s.owners.end() ? OwnerCacheUsage{} : it->second;
    s.memory_blocks = own.memory_blocks;
    s.memory_tokens = own.memory_tokens;
    s.memory_bytes = own.memory_bytes;
    d.entries = d.model_entries = own.disk_entries;
    d.bytes = d.model_bytes = own.disk_bytes;
  }
  json caller{{"uid", uid},
              {"scope", scope_mode_name(mode)},
              {"admin", admin},
              {"disk_directory_bytes", directory_bytes(totals.disk, uid)}};
  if (peer.tcp) caller["uid"] = "tcp";
  json body = stats_body(s, model_id);
  body["caller"] = caller;
  if (admin) {
    json owners = json::array();
    for (const auto& [owner, o] : s.owners) owners.push_back(owner_json(owner, o, d));
    body["owners"] = owners;
  }
  return body;
}

RouteResult cache_stats(const Call& call) {
  const RouteContext& ctx = call.ctx;
  const EngineRef& engine = *call.engine;
  if (engine.scheduler == nullptr) return error_response(unavailable("this engine keeps no prompt cache", "no_cache"));
  json body = cache_stats_json(engine.scheduler->cache_stats(), engine.model.id, ctx.peer, ctx.scope_mode);
  // Every loaded model's, the same way (this one's included).
  json models = json::array();
  for (const HostedModel& m : ctx.host->models()) {
    const std::shared_ptr<const EngineRef> e = m.loaded ? ctx.host->loaded(m.id) : nullptr;
    if (e && e->scheduler)
      models.push_back(cache_stats_json(e->scheduler->cache_stats(), m.id, ctx.peer, ctx.scope_mode));
  }
  body["models"] = std::move(models);
  return json_response(200, body);
}

RouteResult cache_clear(const Call& call) {
  const RouteContext& ctx = call.ctx;
  const HttpRequest& request = call.request;
  const EngineRef& engine = *call.engine;
  std::optional<std::string> model = query_param(request.target, "model");
  if (!request.body.empty()) {
    json j;
    if (auto e = parse_json(request.body, &j)) return error_response(*e);
    auto it = j.find("model");
    if (it != j.end() && !it->is_null()) {
      if (!it->is_string()) return error_response(bad_request("'model' must be a string", "model", "invalid_type"));
      if (model && *model != it->get<std::string>()) {
        return error_response(bad_request("the query's model and the body's model differ", "model"));
      }
      model = it->get<std::string>();
    }
  }
  if (model && !engine.model.answers_to(*model)) return error_response(unknown_model(*model));
  const bool all_models = !model.has_value();
  // Whose entries: the caller's own; an admin's choice of one uid, or everyone's.
  const bool admin = is_cache_admin(ctx.peer);
  std::optional<uint32_t> owner;
  if (!admin) owner = cache_owner(ctx.peer);
  if (std::optional<std::string> uid = query_param(request.target, "uid")) {
    uint32_t n = 0;
    const auto [end, ec] = std::from_chars(uid->data(), uid->data() + uid->size(), n);
    if (uid->empty() || ec != std::errc() || end != uid->data() + uid->size()) {
      return error_response(bad_request("'uid' must be a user id (a non-negative integer)", "uid"));
    }
    if (!admin && n != *owner) {
      return error_response(forbidden("only root or the daemon's own user may clear another user's cache entries"));
    }
    owner = n;
  }
  EngineCall clear;
  clear.engine = call.engine;
  clear.run = [engine = call.engine, all_models, owner, peer = ctx.peer, mode = ctx.scope_mode, host = ctx.host] {
    if (Status s = engine->scheduler->clear_cache(all_models, owner); !s.ok()) {
      return error_response(internal_error("clearing the prompt cache failed: " + s.error().message));
    }
    // Every model's: the other loaded models forget their entries in memory too (the disk's
    // are gone with the first clear).
    if (all_models) {
      for (const HostedModel& m : host->models()) {
        const std::shared_ptr<const EngineRef> other = m.loaded ? host->loaded(m.id) : nullptr;
        if (other == nullptr || other == engine || other->scheduler == nullptr) continue;
        if (Status s = other->scheduler->clear_cache(false, owner); !s.ok()) {
          return error_response(
              internal_error("clearing the prompt cache of " + m.id + " failed: " + s.error().message));
        }
      }
    }
    json body = cache_stats_json(engine->scheduler->cache_stats(), engine->model.id, peer, mode);
    body["cleared"] = all_models ? "all" : "model";
    body["cleared_uid"] = owner ? json(*owner) : json("all");
    return json_response(200, body);
  };
  return clear;
}

RouteResult cache_warm(const Call& call) {
  const RouteContext& ctx = call.ctx;
  const json& j = call.body;
  const EngineRef& engine = *call.engine;
  auto present = [&j](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && !it->is_null();
  };
  const bool has_messages = present("messages"), has_prompt = present("prompt");
  if (has_messages && has_prompt) {
    return error_response(bad_request("give either 'prompt' or 'messages', not both", "prompt"));
  }
  if (!has_messages && !has_prompt) {
    return error_response(bad_request("'prompt' (a completion prompt) or 'messages' (a chat prefix) is required",
                                      "prompt", "missing_required_parameter"));
  }
  // Only the fields warming reads are validated; sampling and streaming options mean nothing here.
  const Endpoint endpoint = has_messages ? Endpoint::Chat : Endpoint::Completions;
  json fields = json::object();
  for (const char* key : {"model", "messages", "prompt", "cache_salt"}) {
    if (present(key)) fields[key] = j.at(key);
  }
  std::variant<OpenAiRequest, ApiError> parsed =
      parse_openai_request(endpoint, fields, engine.model.id, engine.model.aliases);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_response(*e);
  std::variant<std::vector<int32_t>, ApiError> tokens =
      warm_tokens(engine, std::get<OpenAiRequest>(parsed), engine.n_ctx);
  if (auto* e = std::get_if<ApiError>(&tokens)) return error_response(*e);

  GenerationJob job;
  job.engine = call.engine;
  job.writer = std::make_unique<WarmWriter>(engine.model.id);
  job.log_id = random_id("warm-");
  job.request.prompt = std::move(std::get<std::vector<int32_t>>(tokens));
  job.request.warm = true;
  job.request.scope = cache_scope(ctx.peer, ctx.scope_mode, std::get<OpenAiRequest>(parsed).cache_salt);
  // A warm request generates nothing; should an engine ignore `warm`, it stops after one
  // greedy token.
  job.request.max_tokens = 1;
  job.request.sampling.temperature = 0;
  return job;
}

HttpResponse warm_response(const std::string& model_id, const ApiEvent& finished) {
  if (finished.finish_reason == "cancelled") {
    return error_response(unavailable("the warm request was cancelled: the server is shutting down", "shutting_down"));
  }
  const RequestUsage& u = finished.usage;
  const RequestTimings& t = finished.timings;
  // Nothing was decoded: only the prompt's side of the timings.
  const json timings{{"queue_ms", t.queue_ms},
                     {"cache_restore_ms", t.cache_restore_ms},
                     {"cache_restore_bytes", t.cache_restore_bytes},
                     {"prefill_ms", t.prefill_ms},
                     {"prefill_tok_s", t.prefill_tok_s},
                     {"total_ms", t.ttft_ms}};
  return json_response(200,
                       json{{"object", "cache.warm"},
                            {"model", model_id},
                            {"tokens", u.prompt_tokens},
                            {"cached_tokens", {{"memory", u.cached_memory_tokens}, {"disk", u.cached_disk_tokens}}},
                            {"prefilled_tokens", u.prefilled_tokens},
                            {"chunks_written", u.chunks_written},
                            {"finish_reason", finished.finish_reason},
                            {"timings", timings}});
}

std::variant<std::vector<ChatSegment>, ApiError> chat_prefix_segments(const ChatTemplate& tmpl,
                                                                      const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> with_next = messages;
  const bool after_user = !messages.empty() && messages.back().role == "user";
  with_next.push_back(ChatMessage{after_user ? "assistant" : "user", std::string(kSentinel), {}});
  Result<std::vector<ChatSegment>> rendered = render_chat(tmpl, with_next, false);
  if (!rendered.ok()) return bad_request(rendered.error().message, "messages");
  const std::vector<ChatSegment>& segments = *rendered;
  // The last user-text segment holding the sentinel is the extra turn's (an earlier message
  // may quote the sentinel; the extra turn comes last).
  for (size_t k = segments.size(); k-- > 0;) {
    if (segments[k].markup) continue;
    const size_t at = segments[k].text.rfind(kSentinel);
    if (at == std::string::npos) continue;
    std::vector<ChatSegment> prefix(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(k));
    if (at > 0) prefix.push_back(ChatSegment{segments[k].text.substr(0, at), false});
    return prefix;
  }
  return internal_error("the chat template dropped the next turn's content");
}

}  // namespace hearth::ipc
