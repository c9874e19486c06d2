#include "daemon/lifecycle.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "common/duration.h"
#include "common/log.h"
#include "daemon/engine_loader.h"
#include "daemon/model_host.h"
#include "daemon/puller.h"
#include "daemon/systemd.h"
#include "daemon/upstream.h"
#include "engine/model/model_path.h"
#include "engine/scheduler/kv_store.h"
#include "engine/scheduler/scheduler.h"
#include "ipc/server.h"
#include "storage/chunk_store.h"

namespace hearth::daemon {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// After the grace period the engine gets this long to end the cancelled streams, and the
// connections to write their last bytes, before the server closes them. Usually
// milliseconds; a step on a slow device (a software Vulkan device: ~1 s) must fit.
constexpr auto kDrain = 5000ms;
// The watchdog stops pinging when shutdown runs this long past the grace period.
constexpr auto kShutdownHangMargin = 10s;
// At exit the prompt cache's writer writes every chunk still queued (the answers that made
// them are sent already); it gives up on the rest only after this long without finishing one.
constexpr auto kCacheFlush = 5000ms;
// With requests in flight and no forward pass finishing for this long, the engine counts
// as stuck (a step of a large prompt on a slow CPU can take many seconds).
constexpr auto kStuckAfter = 120s;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

// Waits up to `timeout` for one of the shutdown signals; 0 when none arrived.
int wait_signal(const sigset_t& set, std::chrono::nanoseconds timeout) {
  if (timeout < 0ns) timeout = 0ns;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;
    if (errno != EINTR) return 0;
  }
}

// What the watchdog thread asks before each ping. The engine thread is alive when it has
// nothing to do or its step counter moved recently; shutdown must finish by its deadline.
class Liveness {
 public:
  // What the watchdog reads: requests in flight and forward passes done, over every loaded model.
  struct Progress {
    int64_t in_flight = 0;
    uint64_t steps = 0;
  };
  void set_source(std::function<Progress()> source) {
    std::lock_guard<std::mutex> lock(mutex_);
    source_ = std::move(source);
  }
  void set_shutdown_deadline(Clock::time_point t) { deadline_ns_.store(t.time_since_epoch().count()); }

  // Watchdog thread only.
  bool alive() {
    const Clock::time_point now = Clock::now();
    const int64_t d = deadline_ns_.load();
    if (d != 0 && now > Clock::time_point(Clock::duration(d))) return false;
    std::function<Progress()> source;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      source = source_;
    }
    if (!source) return true;  // loading
    const Progress p = source();
    if (p.in_flight == 0 || p.steps != last_steps_) {
      last_steps_ = p.steps;
      last_progress_ = now;
      return true;
    }
    return now - last_progress_ < kStuckAfter;
  }

 private:
  std::mutex mutex_;
  std::function<Progress()> source_;
  std::atomic<int64_t> deadline_ns_{0};
  uint64_t last_steps_ = 0;
  Clock::time_point last_progress_ = Clock::now();
};

// Listeners: the descriptors systemd passed, else our own socket (and TCP if asked).
Status open_listeners(const DaemonConfig& cfg, ipc::Server& server) {
  std::vector<ListenFd> fds = take_listen_fds();
  if (!fds.empty()) {
    for (const ListenFd& l : fds) {
      Status st;
      switch (l.kind) {
        case ListenFd::Kind::Unix:
          st = server.adopt_unix_fd(l.fd);
          break;
        case ListenFd::Kind::Tcp:
          st = server.adopt_tcp_fd(l.fd, cfg.allow_remote);
          break;
        case ListenFd::Kind::Other:
          st = make_error("socket activation: descriptor " + std::to_string(l.fd) +
                          " is not a listening Unix or TCP stream socket");
          break;
      }
      if (!st) return st;
    }
    LOG_INFO("socket activation: serving on " + std::to_string(fds.size()) + " descriptor(s) from systemd");
    if (!cfg.listen_tcp.empty()) LOG_WARN("--listen-tcp ignored: systemd passed the listening sockets");
    if (!cfg.listen_ollama.empty()) {
      LOG_WARN("--listen-ollama ignored: systemd passed the listening sockets (add ListenStream=" + cfg.listen_ollama +
               " to hearthd.socket to serve Ollama's clients)");
    }
    return {};
  }
  const unsigned mode = cfg.socket_group.empty() ? 0600 : 0660;
  Status st = server.listen_unix(cfg.socket, mode, cfg.socket_group);  // logs "listening on ..."
  if (!st) return st;
  if (!cfg.listen_tcp.empty()) {
    if (st = server.listen_tcp(cfg.listen_tcp, cfg.allow_remote); !st) return st;
  }
  // Every listener serves every route: Ollama's listener is one more TCP listener, at the
  // address Ollama's clients look for.
  if (cfg.listen_ollama.empty() || cfg.listen_ollama == cfg.listen_tcp) return {};
  if (st = server.listen_tcp(cfg.listen_ollama, cfg.allow_remote); st) return {};
  const bool in_use = st.error().message.find("in use") != std::string::npos;
  return make_error("--listen-ollama: " + st.error().message + (in_use ? " (is Ollama itself running there?)" : ""));
}

}  // namespace

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// The server side of the configuration: cache scopes, browser origins, the models folder.
static ipc::ServerOptions server_options(const DaemonConfig& cfg) {
  ipc::ServerOptions o;
  o.cache_scope = cfg.cache_scope == "group"    ? ipc::CacheScopeMode::Group
                  : cfg.cache_scope == "shared" ? ipc::CacheScopeMode::Shared
                                                : ipc::CacheScopeMode::User;
  o.allowed_origins = cfg.allowed_origins;
  o.write_timeout = std::chrono::seconds(cfg.write_timeout_s);
  o.models_dir = models_dir();
  if (o.cache_scope == ipc::CacheScopeMode::Shared) {
    LOG_WARN(
        "prompt cache: cache_scope = shared: every client can tell from cached_tokens what others' prompts begin with");
  }
  return o;
}

// Serves until SIGTERM or SIGINT, which it returns; SIGHUP is logged and ignored.
int wait_for_stop(const sigset_t& signals) {
  for (;;) {
    const int sig = wait_signal(signals, 24h);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    if (sig == SIGHUP) LOG_INFO("SIGHUP: reload not supported; still serving");
  }
}

// After the stop signal `sig`: no new requests; those in flight get the grace period (a
// second signal cancels them at once), then open connections a short drain.
void drain(const DaemonConfig& cfg, int sig, const sigset_t& signals, ipc::Server& server, DaemonModelHost& host,
           Liveness& liveness) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(cfg.shutdown_grace_s);
  liveness.set_shutdown_deadline(deadline + kShutdownHangMargin);
  notify_stopping("stopping: " + std::to_string(host.in_flight()) + " requests in flight");
  LOG_INFO(std::string(signal_name(sig)) + ": stopping; " + std::to_string(host.in_flight()) +
           " requests in flight get up to " + std::to_string(cfg.shutdown_grace_s) + " s to finish");
  server.stop_accepting();
  host.stop_accepting();
  while (host.in_flight() > 0) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      LOG_WARN("grace period over: cancelling " + std::to_string(host.in_flight()) + " requests");
      break;
    }
    const int s = wait_signal(signals, std::min<Clock::duration>(deadline - now, 50ms));
    if (s == SIGTERM || s == SIGINT) {
      LOG_WARN(std::string(signal_name(s)) + " again: cancelling " + std::to_string(host.in_flight()) +
               " requests now");
      break;
    }
    if (s == SIGHUP) LOG_INFO("SIGHUP: reload not supported");
  }
  if (host.in_flight() > 0) host.cancel_all();
  const Clock::time_point drain_end = Clock::now() + kDrain;
  while ((host.in_flight() > 0 || server.open_connections() > 0) && Clock::now() < drain_end)
    std::this_thread::sleep_for(10ms);
}

// The [[upstream]]s of the config, their cache-salt secret kept beside the prompt cache;
// null when there are none.
Result<std::shared_ptr<DaemonUpstreams>> start_upstreams(const DaemonConfig& cfg) {
  if (cfg.upstreams.empty()) return std::shared_ptr<DaemonUpstreams>();
  std::error_code ec;
  std::filesystem::create_directories(cfg.cache_dir, ec);
  if (ec) return make_error("cannot create " + cfg.cache_dir + ": " + ec.message());
  return DaemonUpstreams::start(cfg.upstreams, cfg.cache_dir + "/upstream-salt.secret");
}

int run_daemon(const DaemonConfig& cfg) {
  const sigset_t signals = shutdown_signals();
  Liveness liveness;
  Watchdog watchdog;
  watchdog.start([&liveness] { return liveness.alive(); });

  ipc::Server server(server_options(cfg));
  if (Status st = open_listeners(cfg, server); !st) {
    LOG_ERROR(st.error().message);
    notify_status("failed: " + st.error().message);
    return 1;
  }
  // /health answers 503 until set_host.
  std::thread io([&server] { server.run(); });
  auto stop_server = [&] {
    server.stop();
    io.join();
    watchdog.stop();
  };

  HostOptions ho;
  ho.models_dir = models_dir();
  ho.start_model = cfg.model;
  ho.memory_budget = static_cast<uint64_t>(cfg.memory_budget);
  ho.gpu_memory_budget = static_cast<uint64_t>(cfg.gpu_memory_budget);
  const std::chrono::milliseconds keep = *parse_duration(cfg.keep_alive);  // validated by load_config
  ho.keep_alive = keep < 0ms ? ipc::KeepAlive{} : ipc::KeepAlive{keep};
  ho.more_models = cfg.more_models;
  auto host = std::make_shared<DaemonModelHost>(cfg, ho);
  const std::optional<std::string> start = host->resolve("");
  Status loaded = host->listing_status();
  if (loaded) {
    loaded = start ? host->load_at_start(*start)
                   : make_error("no model to serve: " + resolve_model_arg(cfg.model).error().message);
  }
  if (!loaded) {
    const std::string message = "cannot load the model: " + loaded.error().message;
    LOG_ERROR(message);
    notify_status("failed: " + message);
    stop_server();
    return 1;
  }
  Result<std::shared_ptr<DaemonUpstreams>> upstreams = start_upstreams(cfg);
  if (!upstreams) {
    LOG_ERROR(upstreams.error().message);
    notify_status("failed: " + upstreams.error().message);
    stop_server();
    return 1;
  }
  if (*upstreams) server.set_upstreams(*upstreams);
  liveness.set_source([h = host.get()] { return Liveness::Progress{h->in_flight(), h->steps_total()}; });
  server.set_host(host);
  server.set_puller(std::make_shared<DaemonPuller>(ho.models_dir, host));
  const std::string backend = host->loaded(*start)->model.backend;  // not held: an idle model may go
  const std::string ready = "serving " + *start + " on " + backend +
                            (host->models().size() > 1 ? " (" + std::to_string(host->models().size()) +
                                                             " models by name, budget " + host->budget_summary() + ")"
                                                       : "");
  notify_ready(ready);
  LOG_INFO(ready);

  drain(cfg, wait_for_stop(signals), signals, server, *host, liveness);
  liveness.set_source(nullptr);
  stop_server();
  // Chunks still queued for the disk tier are written now (dropped only if the disk hangs).
  const size_t unwritten = host->unload_all(kCacheFlush);
  if (unwritten > 0)
    LOG_WARN("prompt cache: " + std::to_string(unwritten) + " chunks were not written in time and are dropped");
  LOG_INFO("stopped");
  return 0;
}

}  // namespace hearth::daemon
