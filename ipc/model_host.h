// The models a daemon serves by name (issue 16): which names it knows, which models are
// loaded, and loading one on demand. The daemon implements it (daemon/model_host.h); the
// routes only ask. A server without a host serves the one engine given to set_engine.
//
// Thread-safety: every member may be called from any thread. load() blocks (it reads the
// weights file): call it off the io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipc/errors.h"

namespace hearth::ipc {

struct EngineRef;

// How long a model stays loaded after its last request ends: a duration, or for ever.
struct KeepAlive {
  std::optional<std::chrono::milliseconds> duration;  // nullopt: never unloaded for idleness
};

// One model a host can serve, for /v1/models, /api/ps and `hearth ps`.
struct HostedModel {
  std::string id;                    // what requests name (also its aliases)
  std::vector<std::string> aliases;  // its other names (the file name without ".gguf" of a catalog model)
  std::string path;
  uint64_t file_bytes = 0;
  int64_t created = 0;       // unix seconds (the file's mtime)
  std::string arch;          // general.architecture ("" when unreadable)
  std::string quantization;  // the file type ("Q4_K_M")
  bool available = true;     // false: the file cannot be served (reason says why)
  std::string reason;
  bool loaded = false;
  // Loaded models only.
  std::string backend;
  uint64_t memory_bytes = 0;         // weights + KV pool, as charged to the budgets
  std::string device;                // the GPU holding them ("" in RAM)
  uint64_t device_memory_bytes = 0;  // the part of memory_bytes in the GPU's memory
  int32_t n_ctx = 0;
  int64_t in_flight = 0;               // requests queued or running on it
  double idle_s = 0;                   // since its last request ended (0 while serving)
  std::optional<double> expires_in_s;  // nullopt: kept loaded
  int64_t loaded_at = 0;               // unix seconds
  uint64_t loads = 0;                  // times loaded since the daemon started
};

class ModelHost {
 public:
  virtual ~ModelHost() = default;

  // The id a request's "model" names (an id or an alias; "" = the default model), or
  // nullopt when the host has no such model.
  virtual std::optional<std::string> resolve(std::string_view name) const = 0;
  // The engine of a loaded model; null when it is not loaded. Never blocks.
  virtual std::shared_ptr<const EngineRef> loaded(const std::string& id) = 0;
  // Loads the model when needed (concurrent callers share one load), first unloading the
  // least recently used idle models when the memory budget would be exceeded. Errors: 404
  // unknown, 507 when the model alone exceeds the budget, 503 when the budget is held by
  // models serving requests, 500 when the file cannot be loaded.
  virtual std::variant<std::shared_ptr<const EngineRef>, ApiError> load(const std::string& id) = 0;
  // Unloads the model once its requests have ended (requests meanwhile are served; a load()
  // keeps it). False when it is not loaded.
  virtual bool unload(const std::string& id) = 0;
  // A request on model id ended (loaded() and load() count as its start); keep_alive, when
  // the request gave one, becomes the model's keep-alive from now on.
  virtual void request_ended(const std::string& id, std::optional<KeepAlive> keep_alive) = 0;
  // Every model the host knows, installed or given, loaded or not.
  virtual std::vector<HostedModel> models() const = 0;
  // Whether at least one model can be served (loaded, or loadable within the budget).
  virtual bool servable() const = 0;
};

}  // namespace hearth::ipc
