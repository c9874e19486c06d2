#include "daemon/upstream.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/thread_name.h"
#include "daemon/upstream_salt.h"
#include "fetch/http.h"

namespace hearth::daemon {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// Requests in a row that get no answer before the breaker opens, and how often the
// background probe tries an open one (and re-tries a discovery that failed).
constexpr int kBreakerFailures = 3;
constexpr auto kProbeEvery = 2s;
constexpr size_t kMaxModelsBytes = 4u << 20;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

struct DaemonUpstreams::Upstream {
  UpstreamConfig cfg;
  std::string key;          // the API key ("" = none); never logged
  std::string base;         // http(s)://host[:port][/path], without a trailing "/" or "/v1"
  std::string unix_socket;  // unix: upstreams: the socket; base is then http://localhost

  mutable std::mutex mutex;  // guards everything below
  std::vector<std::string> remote_models;
  bool discovered = false;  // remote_models came from the upstream (or the config lists them)
  Clock::time_point next_discovery{};
  int failures_in_row = 0;
  bool probing = false;
  int64_t requests = 0, failures = 0, retries = 0, in_flight = 0;
  double last_ttfb_ms = 0;
  std::string last_error;

  fetch::HttpRequest request(const std::string& method, const std::string& path) const {
    fetch::HttpRequest r;
    r.method = method;
    r.url = base + path;
    r.bearer_token = key;
    r.unix_socket = unix_socket;
    r.ca_file = cfg.ca_file;
    r.timeout_s = cfg.idle_timeout_s;
    r.connect_timeout_s = cfg.connect_timeout_s;
    r.first_byte_timeout_s = cfg.first_byte_timeout_s;
    // Kept connections: a turn's request skips the connect (and TLS handshake); at most as
    // many idle as may be in flight. A kept connection found closed is replaced inside fetch,
    // without counting as this upstream's one retry.
    r.keep_alive_max = std::max<int32_t>(1, cfg.max_concurrency);
    return r;
  }

  bool open() const { return failures_in_row >= kBreakerFailures; }
};

namespace {

using Upstream = DaemonUpstreams::Upstream;

// GET /v1/models: the ids of its "data", or why not.
Result<std::vector<std::string>> list_models(const Upstream& u) {
  fetch::HttpRequest r = u.request("GET", "/v1/models");
  r.first_byte_timeout_s = u.cfg.connect_timeout_s;
  Result<fetch::TextResponse> got = fetch::http_get_text(r, kMaxModelsBytes);
  if (!got) return got.error();
  if (got->response.status != 200)
    return make_error("GET /v1/models answered HTTP " + std::to_string(got->response.status));
  const nlohmann::json j = nlohmann::json::parse(got->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return make_error("GET /v1/models: no \"data\" array in the answer");
  std::vector<std::string> ids;
  for (const auto& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  return ids;
}

// Asks the upstream for its models and keeps them; logs what changed.
void discover(Upstream& u) {
  Result<std::vector<std::string>> ids = list_models(u);
  std::lock_guard<std::mutex> lock(u.mutex);
  if (!ids) {
    u.next_discovery = Clock::now() + kProbeEvery * 5;
    LOG_WARN("upstream " + u.cfg.name + ": cannot list its models: " + ids.error().message);
    return;
  }
  if (!u.discovered || *ids != u.remote_models)
    LOG_INFO("upstream " + u.cfg.name + " serves " + std::to_string(ids->size()) + " models");
  u.remote_models = std::move(*ids);
  u.discovered = true;
  u.next_discovery = Clock::now() + std::chrono::seconds(u.cfg.discover_interval_s);
}

// A breaker that is open gets one probe; an answer closes it.
void probe(Upstream& u) {
  {
    std::lock_guard<std::mutex> lock(u.mutex);
    if (!u.open() || u.probing) return;
    u.probing = true;
  }
  Result<std::vector<std::string>> ids = list_models(u);
  std::lock_guard<std::mutex> lock(u.mutex);
  u.probing = false;
  if (!ids) return;
  LOG_INFO("upstream " + u.cfg.name + " answers again: circuit closed");
  u.failures_in_row = 0;
  u.last_error.clear();
}

Status set_address(Upstream& u) {
  const std::string& url = u.cfg.url;
  if (url.rfind("unix:", 0) == 0) {
    u.unix_socket = url.substr(5);
    u.base = "http://localhost";
    return {};
  }
  u.base = url;
  while (!u.base.empty() && u.base.back() == '/') u.base.pop_back();
  if (u.base.size() >= 3 && u.base.compare(u.base.size() - 3, 3, "/v1") == 0) u.base.resize(u.base.size() - 3);
  Result<fetch::Url> parsed = fetch::parse_url(u.base);
  if (!parsed) return make_error("upstream " + u.cfg.name + ": " + parsed.error().message);
  return {};
}

ipc::UpstreamModel model_of(const Upstream& u, const std::string& remote) {
  return ipc::UpstreamModel{u.cfg.model_prefix + remote, remote, u.cfg.name, u.cfg.url, u.cfg.fallback};
}

}  // namespace

Result<std::shared_ptr<DaemonUpstreams>> DaemonUpstreams::start(const std::vector<UpstreamConfig>& configs,
                                                                const std::string& salt_secret_path) {
  std::shared_ptr<DaemonUpstreams> self(new DaemonUpstreams());
  Result<std::string> secret = load_or_create_salt_secret(salt_secret_path);
  if (!secret) return make_error("upstream cache-salt secret: " + secret.error().message);
  self->secret_ = std::move(*secret);
  for (const UpstreamConfig& c : configs) {
    auto u = std::make_unique<Upstream>();
    u->cfg = c;
    if (!c.api_key_file.empty()) {
      Result<std::string> key = read_api_key(c.api_key_file);
      if (!key) return make_error("upstream " + c.name + ": " + key.error().message);
      u->key = std::move(*key);
    }
    if (Status s = set_address(*u); !s) return s.error();
    u->remote_models = c.models;
    u->discovered = !c.models.empty();
    if (!u->discovered) discover(*u);
    LOG_INFO("upstream " + c.name + " at " + c.url + ": " + std::to_string(u->remote_models.size()) + " models" +
             (c.models.empty() ? " (discovered)" : "") + (u->key.empty() ? "" : ", with an API key"));
    self->upstreams_.push_back(std::move(u));
  }
  self->thread_ = std::thread([raw = self.get()] { raw->background(); });
  return self;
}

DaemonUpstreams::~DaemonUpstreams() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DaemonUpstreams::background() {
  set_thread_name("hearth-upstream");
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kProbeEvery);
    if (stop_) break;
    lock.unlock();
    for (auto& u : upstreams_) {
      bool due = false;
      {
        std::lock_guard<std::mutex> ul(u->mutex);
        due = u->cfg.models.empty() && Clock::now() >= u->next_discovery;
      }
      probe(*u);
      if (due) discover(*u);
    }
    lock.lock();
  }
}

std::optional<ipc::UpstreamModel> DaemonUpstreams::find(std::string_view model) const {
  for (const auto& u : upstreams_) {
    std::lock_guard<std::mutex> lock(u->mutex);
    for (const std::string& m : u->remote_models)
      if (u->cfg.model_prefix + m == model) return model_of(*u, m);
  }
  return std::nullopt;
}

std::vector<ipc::UpstreamModel> DaemonUpstreams::models() const {
  std::vector<ipc::UpstreamModel> out;
  for (const auto& u : upstreams_) {
    std::lock_guard<std::mutex> lock(u->mutex);
    for (const std::string& m : u->remote_models) out.push_back(model_of(*u, m));
  }
  return out;
}

std::vector<ipc::UpstreamState> DaemonUpstreams::states() const {
  std::vector<ipc::UpstreamState> out;
  for (const auto& u : upstreams_) {
    std::lock_guard<std::mutex> lock(u->mutex);
    ipc::UpstreamState s;
    s.name = u->cfg.name;
    s.url = u->cfg.url;
    s.breaker = !u->open() ? "closed" : u->probing ? "half_open" : "open";
    s.n_models = u->remote_models.size();
    s.requests = u->requests;
    s.failures = u->failures;
    s.retries = u->retries;
    s.in_flight = u->in_flight;
    s.last_ttfb_ms = u->last_ttfb_ms;
    s.last_error = u->last_error;
    out.push_back(std::move(s));
  }
  return out;
}

std::string DaemonUpstreams::cache_salt(const std::string& scope_key) const {
  return derive_cache_salt(secret_, scope_key);
}

namespace {

// Whether a request may go to u now: a 503 while its breaker is open or it has
// max_concurrency requests in flight; else it is counted in flight.
std::optional<ipc::ForwardFailure> admit(Upstream& u) {
  std::lock_guard<std::mutex> lock(u.mutex);
  if (u.open()) {
    return ipc::ForwardFailure{503,
                               "upstream '" + u.cfg.name + "' is not answering (" + std::to_string(u.failures_in_row) +
                                   " requests in a row failed; last: " + u.last_error + "); hearth probes it every " +
                                   std::to_string(std::chrono::seconds(kProbeEvery).count()) + " s"};
  }
  if (u.in_flight >= u.cfg.max_concurrency) {
    return ipc::ForwardFailure{503, "upstream '" + u.cfg.name + "' has its max_concurrency (" +
                                        std::to_string(u.cfg.max_concurrency) + ") of requests in flight"};
  }
  ++u.in_flight;
  ++u.requests;
  return std::nullopt;
}

// One try, on a kept connection when one is idle (else a new one). Returns whether the
// answer's header came (then the body went to on_data, and *broken says how it broke off, if
// it did); else *why says what failed.
struct Attempt {
  bool answered = false;
  bool timed_out = false;
  std::string why;
};

Attempt attempt(Upstream& u, const ipc::ForwardCall& call, const std::function<bool(int, const std::string&)>& on_head,
                const std::function<bool(const char*, size_t)>& on_data, const std::atomic<bool>& cancelled,
                std::string* broken) {
  fetch::HttpRequest r = u.request("POST", call.path);
  r.body = call.body;
  r.content_type = "application/json";
  r.headers.emplace_back("Accept", "application/json, text/event-stream");
  r.cancelled = &cancelled;
  Attempt a;
  int server_error = 0;
  const Clock::time_point t0 = Clock::now();
  auto headers = [&](const fetch::HttpResponse& h) -> Status {
    if (h.status >= 500) {
      server_error = h.status;
      return make_error("answered HTTP " + std::to_string(h.status));
    }
    a.answered = true;
    {
      std::lock_guard<std::mutex> lock(u.mutex);
      u.last_ttfb_ms = ms_since(t0);
    }
    return on_head(h.status, h.header("content-type")) ? Status{} : make_error("stopped");
  };
  auto body = [&](const char* data, size_t n) -> Status { return on_data(data, n) ? Status{} : make_error("stopped"); };
  fetch::HttpOutcome outcome;
  Result<fetch::HttpResponse> got = fetch::http_request(r, headers, body, &outcome);
  if (a.answered) {
    if (!got && !cancelled.load()) *broken = got.error().message;
    return a;
  }
  a.timed_out = outcome.timed_out;
  a.why = server_error ? "answered HTTP " + std::to_string(server_error) : got ? "no answer" : got.error().message;
  return a;
}

}  // namespace

std::optional<ipc::ForwardFailure> DaemonUpstreams::forward(const ipc::ForwardCall& call,
                                                            const std::function<bool(int, const std::string&)>& on_head,
                                                            const std::function<bool(const char*, size_t)>& on_data,
                                                            const std::atomic<bool>& cancelled, std::string* broken) {
  Upstream* found = nullptr;
  for (auto& u : upstreams_)
    if (u->cfg.name == call.upstream) found = u.get();
  if (found == nullptr) return ipc::ForwardFailure{502, "no upstream named '" + call.upstream + "'"};
  Upstream& u = *found;
  if (std::optional<ipc::ForwardFailure> refused = admit(u)) return refused;
  Attempt a;
  for (int i = 0; i < 2 && !cancelled.load(); ++i) {
    if (i > 0) {
      std::lock_guard<std::mutex> lock(u.mutex);
      ++u.retries;
      LOG_INFO("upstream " + u.cfg.name + ": " + a.why + "; trying again on another connection");
    }
    a = attempt(u, call, on_head, on_data, cancelled, broken);
    if (a.answered) break;
  }
  std::lock_guard<std::mutex> lock(u.mutex);
  --u.in_flight;
  if (a.answered || cancelled.load()) {
    if (a.answered) u.failures_in_row = 0;
    u.last_error = *broken;
    return std::nullopt;
  }
  ++u.failures;
  u.last_error = a.why;
  if (++u.failures_in_row == kBreakerFailures)
    LOG_WARN("upstream " + u.cfg.name + ": " + std::to_string(kBreakerFailures) +
             " requests in a row got no answer: circuit open");
  return ipc::ForwardFailure{a.timed_out ? 504 : 502, "upstream '" + u.cfg.name + "' (" + u.cfg.url + ") " +
                                                          (a.timed_out ? "did not answer in time" : "gave no answer") +
                                                          ": " + a.why + " (tried twice)"};
}

}  // namespace hearth::daemon
