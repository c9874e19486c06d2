// Models served by another engine (vLLM, SGLang, llama-server, another hearthd) that this
// daemon forwards requests to (issue 45). The daemon implements UpstreamForwarder over its
// HTTP client (daemon/upstream.h); ipc only asks, as it asks a ModelHost: which names are
// upstream models, how each upstream fares, and to send one request's body and hand back
// the answer's bytes as they arrive. ipc validates the request first and re-frames the
// answer (api/upstream_forward.h).
//
// Thread-safety: every member may be called from any thread; forward() blocks for the whole
// exchange: call it off the io thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::ipc {

// One model an upstream serves, as hearth's clients name it.
struct UpstreamModel {
  std::string id;         // model_prefix + the upstream's own name
  std::string remote_id;  // the upstream's own name: what the forwarded body says
  std::string upstream;   // the upstream's name in the config
  std::string url;        // its base URL (no key, ever)
  std::string fallback;   // a local model that answers when the upstream cannot; "" = none
};

// How one upstream fares, for /health and /metrics.
struct UpstreamState {
  std::string name;
  std::string url;
  std::string breaker = "closed";  // "closed" (sending), "open" (refusing), "half_open" (one probe)
  size_t n_models = 0;
  int64_t requests = 0;  // forwarded since start, retries not counted
  int64_t failures = 0;  // requests that got no answer (after the retry)
  int64_t retries = 0;
  int64_t in_flight = 0;
  double last_ttfb_ms = 0;  // request sent -> the answer's header, last success
  std::string last_error;   // "" when the last request succeeded
};

// A request to send: the body already re-written for the upstream (its model name, the
// caller's cache_salt).
struct ForwardCall {
  std::string upstream;
  std::string path;  // "/v1/chat/completions", "/v1/completions"
  std::string body;  // JSON
};

// Why a forwarded request got no answer from the upstream, before any byte of one came.
struct ForwardFailure {
  int status = 502;     // 502 (refused, TLS, 5xx, over its concurrency: 503) or 504 (timed out)
  std::string message;  // names the upstream and what happened
};

class UpstreamForwarder {
 public:
  virtual ~UpstreamForwarder() = default;

  // The upstream model a request's "model" names; nullopt when none.
  virtual std::optional<UpstreamModel> find(std::string_view model) const = 0;
  virtual std::vector<UpstreamModel> models() const = 0;
  virtual std::vector<UpstreamState> states() const = 0;
  // The cache_salt the upstream gets for a request in cache scope scope_key
  // (CacheScope::key: the caller's uid, gid or "shared", with its own salt folded in): a keyed
  // hash, the same for the same scope across restarts, from which no scope can be read back.
  virtual std::string cache_salt(const std::string& scope_key) const = 0;

  // Sends call, retrying once on a new connection when the upstream fails before its first
  // byte (refused, TLS, timed out, a 5xx). on_head gets the answer's status and content type
  // once; on_data each piece of its body as it arrives (false from either stops the exchange).
  // cancelled is read while waiting. Returns the failure when no answer came; else nullopt,
  // with *broken set when the body broke off after it started (the connection lost, an idle
  // timeout) and left "" when it ended whole or was stopped.
  virtual std::optional<ForwardFailure> forward(const ForwardCall& call,
                                                const std::function<bool(int status, const std::string& type)>& on_head,
                                                const std::function<bool(const char* data, size_t n)>& on_data,
                                                const std::atomic<bool>& cancelled, std::string* broken) = 0;
};

}  // namespace hearth::ipc
