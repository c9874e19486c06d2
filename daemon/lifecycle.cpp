#include "daemon/lifecycle.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>

#include "common/log.h"
#include "daemon/engine_loader.h"
#include "daemon/systemd.h"
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
// At exit the prompt cache's writer gets this long for the chunks still queued.
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
  void set_scheduler(const Scheduler* s) { scheduler_.store(s); }
  void set_shutdown_deadline(Clock::time_point t) { deadline_ns_.store(t.time_since_epoch().count()); }

  // Watchdog thread only.
  bool alive() {
    const Clock::time_point now = Clock::now();
    const int64_t d = deadline_ns_.load();
    if (d != 0 && now > Clock::time_point(Clock::duration(d))) return false;
    const Scheduler* s = scheduler_.load();
    if (s == nullptr) return true;  // loading
    const uint64_t steps = s->stats().steps_total;
    if (s->in_flight() == 0 || steps != last_steps_) {
      last_steps_ = steps;
      last_progress_ = now;
      return true;
    }
    return now - last_progress_ < kStuckAfter;
  }

 private:
  std::atomic<const Scheduler*> scheduler_{nullptr};
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
    return {};
  }
  const unsigned mode = cfg.socket_group.empty() ? 0600 : 0660;
  Status st = server.listen_unix(cfg.socket, mode, cfg.socket_group);  // logs "listening on ..."
  if (!st) return st;
  if (!cfg.listen_tcp.empty()) return server.listen_tcp(cfg.listen_tcp, cfg.allow_remote);
  return {};
}

// The disk tier's budget when --cache-max-bytes is not given: the smaller of 4 GiB and a
// tenth of the free space of the filesystem the cache lives on (its nearest existing
// ancestor when the directory does not exist yet).
uint64_t default_cache_budget(const std::string& dir) {
  constexpr uint64_t kMax = uint64_t{4} << 30;
  std::filesystem::path p = dir;
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  struct statvfs vfs {};
  if (p.empty() || statvfs(p.c_str(), &vfs) != 0) return kMax;
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return std::min(kMax, free_bytes / 10);
}

// The prompt cache's disk tier: the model file's fingerprint (remembered in the cache's
// index, so only the first start reads the whole file; it also seeds the hash chain), then
// the store in the directory, within the budget. Null: memory only, said in the log.
std::unique_ptr<storage::ChunkStore> open_disk_tier(const DaemonConfig& cfg, const std::string& model_path,
                                                    const ModelConfig& model, SchedulerOptions& o) {
  if (cfg.no_disk_cache) {
    LOG_INFO("prompt cache: memory only (--no-disk-cache)");
    return nullptr;
  }
  const Clock::time_point t0 = Clock::now();
  Result<std::string> fp = storage::model_fingerprint(cfg.cache_dir, model_path);
  if (!fp) {
    LOG_WARN("prompt cache: memory only: cannot fingerprint the model file: " + fp.error().message);
    return nullptr;
  }
  o.model_fingerprint = *fp;
  const uint64_t max_bytes =
      cfg.cache_max_bytes > 0 ? static_cast<uint64_t>(cfg.cache_max_bytes) : default_cache_budget(cfg.cache_dir);
  Result<std::unique_ptr<storage::ChunkStore>> store =
      open_kv_store(model, o.kv_type, o.model_fingerprint, cfg.cache_dir, max_bytes);
  if (!store) {
    LOG_WARN("prompt cache: the disk tier is off: " + store.error().message);
    return nullptr;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  LOG_INFO("prompt cache: " + cfg.cache_dir + ", at most " + std::to_string(max_bytes >> 20) +
           " MiB on disk; model fingerprint " + o.model_fingerprint + " (" + std::to_string(static_cast<int64_t>(ms)) +
           " ms)");
  return std::move(*store);
}

SchedulerOptions scheduler_options(const DaemonConfig& cfg, const ModelConfig& model) {
  SchedulerOptions o;
  o.n_parallel = cfg.parallel;
  o.n_ctx = cfg.ctx;
  if (model.n_ctx_train > 0 && cfg.ctx > model.n_ctx_train) {
    if (cfg.ctx_set) {
      LOG_WARN("--ctx " + std::to_string(cfg.ctx) + " is more than the model was trained for (" +
               std::to_string(model.n_ctx_train) + " tokens); quality may drop past that");
    } else {
      o.n_ctx = model.n_ctx_train;
      LOG_INFO("context: " + std::to_string(o.n_ctx) + " tokens (the model's training context)");
    }
  }
  o.prefill_chunk = cfg.prefill_chunk;
  o.step_budget_ms = cfg.step_budget_ms;
  o.queue_max = cfg.queue_max;
  o.kv_type = cfg.kv_type;
  return o;
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

// The model loaded and its scheduler running: what the daemon serves. The scheduler is
// declared last, so it stops (joining the engine thread) before the model it uses goes.
struct Serving {
  LoadedEngine engine;
  SchedulerOptions options;
  std::unique_ptr<Scheduler> scheduler;
};

Result<Serving> start_engine(const DaemonConfig& cfg) {
  const std::string model_name = cfg.model.empty() ? "the default model" : cfg.model;
  notify_status("loading " + model_name);
  LOG_INFO("loading " + model_name);
  const Clock::time_point load_start = Clock::now();
  Result<LoadedEngine> loaded = load_engine(cfg.model, cfg.backend, cfg.threads, cfg.vk_device, cfg.chat_template);
  if (!loaded) return make_error("cannot load the model: " + loaded.error().message);
  Serving s{std::move(*loaded), {}, nullptr};
  LoadedEngine& engine = s.engine;
  s.options = scheduler_options(cfg, engine.model->config());
  std::unique_ptr<storage::ChunkStore> store =
      s.options.prefix_cache ? open_disk_tier(cfg, engine.info.path, engine.model->config(), s.options) : nullptr;
  Result<std::unique_ptr<Scheduler>> created =
      Scheduler::create(*engine.model, *engine.backend, *engine.tokenizer, s.options, std::move(store));
  if (!created) return make_error("cannot start the engine: " + created.error().message);
  s.scheduler = std::move(*created);
  const SchedulerStats st = s.scheduler->stats();
  const CacheStats cs = s.scheduler->cache_stats();
  LOG_DEBUG("KV pool: " + std::to_string(st.kv_blocks_total) + " blocks of " + std::to_string(s.options.block_tokens) +
            " tokens (" + std::to_string(cs.memory_capacity_bytes >> 20) +
            " MiB); prompt cache: " + (cs.disk_enabled ? "memory and disk" : "memory only"));
  engine.info.n_ctx = s.options.n_ctx;
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();
  LOG_INFO("model loaded in " + std::to_string(static_cast<int64_t>(load_ms)) + " ms: " + engine.info.path + " (" +
           engine.info.arch + ", " + engine.backend->info().name + ", ctx " + std::to_string(s.options.n_ctx) +
           ", parallel " + std::to_string(s.options.n_parallel) + ")");
  return s;
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
void drain(const DaemonConfig& cfg, int sig, const sigset_t& signals, ipc::Server& server, Scheduler& scheduler,
           Liveness& liveness) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(cfg.shutdown_grace_s);
  liveness.set_shutdown_deadline(deadline + kShutdownHangMargin);
  notify_stopping("stopping: " + std::to_string(scheduler.in_flight()) + " requests in flight");
  LOG_INFO(std::string(signal_name(sig)) + ": stopping; " + std::to_string(scheduler.in_flight()) +
           " requests in flight get up to " + std::to_string(cfg.shutdown_grace_s) + " s to finish");
  server.stop_accepting();
  scheduler.stop_accepting();
  while (scheduler.in_flight() > 0) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      LOG_WARN("grace period over: cancelling " + std::to_string(scheduler.in_flight()) + " requests");
      break;
    }
    const int s = wait_signal(signals, std::min<Clock::duration>(deadline - now, 50ms));
    if (s == SIGTERM || s == SIGINT) {
      LOG_WARN(std::string(signal_name(s)) + " again: cancelling " + std::to_string(scheduler.in_flight()) +
               " requests now");
      break;
    }
    if (s == SIGHUP) LOG_INFO("SIGHUP: reload not supported");
  }
  if (scheduler.in_flight() > 0) scheduler.cancel_all();
  const Clock::time_point drain_end = Clock::now() + kDrain;
  while ((scheduler.in_flight() > 0 || server.open_connections() > 0) && Clock::now() < drain_end)
    std::this_thread::sleep_for(10ms);
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
  // /health answers 503 until set_engine.
  std::thread io([&server] { server.run(); });
  auto stop_server = [&] {
    server.stop();
    io.join();
    watchdog.stop();
  };

  Result<Serving> serving = start_engine(cfg);
  if (!serving) {
    LOG_ERROR(serving.error().message);
    notify_status("failed: " + serving.error().message);
    stop_server();
    return 1;
  }
  Scheduler& scheduler = *serving->scheduler;
  const ipc::ModelInfo& info = serving->engine.info;
  liveness.set_scheduler(&scheduler);
  server.set_engine(&scheduler, serving->engine.tokenizer.get(), info);
  const std::string ready = "serving " + info.id + " on " + info.backend;
  notify_ready(ready);
  LOG_INFO(ready);

  drain(cfg, wait_for_stop(signals), signals, server, scheduler, liveness);
  stop_server();
  // Chunks still queued for the disk tier are written now, within a bounded time.
  const size_t unwritten = scheduler.close_cache(kCacheFlush);
  if (unwritten > 0)
    LOG_WARN("prompt cache: " + std::to_string(unwritten) + " chunks were not written in time and are dropped");
  serving->scheduler.reset();  // joins the engine thread; before the model it uses
  LOG_INFO("stopped");
  return 0;
}

}  // namespace hearth::daemon
