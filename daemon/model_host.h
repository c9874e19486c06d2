// hearthd's models by name (ipc/model_host.h): every GGUF in the models folder (or, when
// --model is given, the models given), loaded on first use within the memory budgets, the
// least recently used idle one unloaded to make room, each unloaded after its keep-alive.
// A model on the CPU counts against --memory-budget (RAM); one on a GPU, whose weights and
// KV pool live in device memory, against --gpu-memory-budget of that device. Every model
// goes to the device the configuration picks, which the host learns at the first load. Each loaded model is a
// Serving (daemon/serving.h): its own backend, engine thread, KV pool and scheduler; the
// prompt cache's directory is shared, keyed by each file's fingerprint, so a model's cached
// prefixes outlive its unloading.
//
// A loaded model lives in an EngineRef whose owner is its Serving: a request holds it while
// it runs, so a model is unloaded only when no request holds it and its scheduler is idle.
// Unloading (flushing its cache writes, joining its engine thread) runs on the host's reaper
// thread or on the loading thread that needs the room, never on an io thread.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "daemon/config.h"
#include "engine/scheduler/scheduler.h"
#include "ipc/model_host.h"

namespace hearth::daemon {

struct HostOptions {
  std::string models_dir;                // every *.gguf in it is served when start_model is ""
  std::string start_model;               // --model ("" = the catalog's default when installed)
  std::vector<std::string> more_models;  // --model given again: served too, loaded on first use
  uint64_t memory_budget = 0;            // bytes; 0 = three quarters of RAM
  uint64_t gpu_memory_budget = 0;        // bytes of the GPU's memory; 0 = nine tenths of it
  ipc::KeepAlive keep_alive{std::chrono::minutes(5)};
};

class DaemonModelHost final : public ipc::ModelHost {
 public:
  // Lists the models (reading each file's header). The configuration's backend, threads,
  // context and cache settings apply to every model loaded.
  DaemonModelHost(DaemonConfig cfg, HostOptions options);
  // Stops the reaper and unloads every model (flushing their cache writes).
  ~DaemonModelHost() override;

  std::optional<std::string> resolve(std::string_view name) const override;
  std::shared_ptr<const ipc::EngineRef> loaded(const std::string& id) override;
  Loaded load(const std::string& id) override;
  bool unload(const std::string& id) override;
  void request_ended(const std::string& id, std::optional<ipc::KeepAlive> keep_alive) override;
  std::vector<ipc::HostedModel> models() const override;
  bool servable() const override;

  // The model loaded at start: kept loaded (keep-alive for ever) unless a request, an unload
  // or the budget says otherwise. An error when it cannot be loaded.
  Status load_at_start(const std::string& id);
  uint64_t memory_budget() const { return budget_; }
  // "N MiB of RAM", and the GPU's budget once a model has loaded on one.
  std::string budget_summary() const;
  // An error when a model given by name (--model repeated) names no file.
  Status listing_status() const { return listing_error_.empty() ? Status{} : make_error(listing_error_); }

  // A file just installed in the models folder (POST /api/pull): listed and servable by name
  // when the host serves the folder (no --model); else it waits for the next start. Its id.
  std::string add_installed(const std::string& path);

  // For the daemon's lifecycle, over every loaded model.
  int64_t in_flight() const;
  uint64_t steps_total() const;
  void stop_accepting();
  void cancel_all();
  // Unloads every model: cache writes still queued are written, each store giving up only
  // after `flush` without progress; returns how many chunks were dropped. Loading is refused from then on.
  size_t unload_all(std::chrono::milliseconds flush);

 private:
  struct Slot;
  struct Taken;
  using Clock = std::chrono::steady_clock;
  // Finishes an unload begun under mutex_ (the slot Unloading): writes its queued cache
  // chunks, frees its engine, then marks the slot Unloaded and its memory free. Off the lock.
  size_t finish(Taken t, std::chrono::milliseconds flush, const char* why);
  Slot* find(const std::string& id);
  const Slot* find(const std::string& id) const;
  static bool idle(const Slot& s);
  // How long s stays after its last request: 0 once an unload is asked for.
  ipc::KeepAlive keep_alive_of(const Slot& s) const;
  uint64_t estimate_bytes(const Slot& s) const;
  // The draft model's weights and KV for a model with options o (0: none, or unreadable).
  uint64_t draft_estimate(const SchedulerOptions& o) const;
  // Under mutex_: the bytes charged to the GPU's budget (device) or to RAM's.
  uint64_t charged_bytes(bool device) const;
  uint64_t gpu_budget() const;  // under mutex_, with gpu_
  // Under mutex_: TooLarge when a model needing these bytes exceeds a budget alone.
  std::optional<ipc::HostError> too_large(const std::string& id, uint64_t host, uint64_t device) const;
  std::string loaded_summary() const;
  void reap();

  const DaemonConfig cfg_;
  const HostOptions options_;
  const uint64_t budget_;
  std::string default_id_;
  std::string listing_error_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a load ended, a request ended, stop
  std::vector<std::unique_ptr<Slot>> slots_;
  bool stopping_ = false;
  bool cache_reconciled_ = false;  // the first load reconciled the prompt cache's directory
  std::optional<DeviceInfo> gpu_;  // the GPU models load on, once one has
  std::thread reaper_;
};

// Three quarters of the machine's RAM (/proc/meminfo MemTotal); 8 GiB when unreadable.
uint64_t default_memory_budget();

}  // namespace hearth::daemon
