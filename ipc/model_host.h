// The models a server serves by name (issue 16): which names it knows, which models are
// loaded, and loading one on demand. The daemon implements ModelHost (daemon/model_host.h);
// the routes only ask. A server serving one engine has a host with one model.
//
// Also the value types every route shares about a model: what it is (ModelInfo), its
// running engine (EngineRef), and why a host could not give one (HostError: the host's own
// kinds; ipc alone turns them into HTTP answers, errors.h host_error()).
//
// Thread-safety: every member of ModelHost may be called from any thread. load() blocks (it
// reads the weights file): call it off the io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/sampling/defaults.h"
#include "engine/tokenizer/chat_template.h"

namespace hearth {
class GrammarCompiler;
class Scheduler;
class Tokenizer;
}  // namespace hearth

namespace hearth::ipc {

// What /v1/models and the responses' "model" field report of a loaded model.
struct ModelInfo {
  std::string id;                                 // the catalog's name ("qwen2.5-coder:0.5b"), else the file's
  std::vector<std::string> aliases;               // its other names: the file name without ".gguf"
  std::string path;                               // the weights file
  std::string arch;                               // general.architecture
  std::string backend;                            // "cpu", "vulkan", "cuda"
  int32_t n_ctx = 0;                              // tokens per sequence
  int64_t created = 0;                            // unix seconds (the file's mtime)
  ChatTemplate chat_template{ChatFamily::Gemma};  // how chat requests render messages
  ModelSampling sampling;                         // its own defaults: what a request leaves out

  // Whether a request's "model" (or /v1/models/<name>) names this model: its id or an alias.
  bool answers_to(std::string_view name) const {
    if (name == id) return true;
    for (const std::string& a : aliases)
      if (name == a) return true;
    return false;
  }
};

// One loaded model as the routes use it. Immutable once published.
struct EngineRef {
  // Null in an engine that only tokenizes (the HTTP fuzzer's, tests/ipc/http_fuzz.cpp): the
  // routes that read the scheduler's state (GET /api/cache, /metrics' engine part) then
  // answer without it; everything else needs only the tokenizer and n_ctx.
  Scheduler* scheduler = nullptr;
  const Tokenizer* tokenizer = nullptr;
  ModelInfo model;
  int32_t n_ctx = 0;  // tokens a sequence holds (prompt + generated): the scheduler's, at most the model's
  // Compiles the grammars of constrained requests for this model's vocabulary (and keeps
  // them, so a schema or tool list sent again compiles once). Null with no tokenizer.
  std::shared_ptr<GrammarCompiler> grammars;
  // What the pointers above point into, when someone else does not keep it alive: a
  // ModelHost's loaded model lives as long as the last request that holds its EngineRef.
  std::shared_ptr<const void> owner;
};

// An EngineRef for a running scheduler: n_ctx is the scheduler's, capped by model.n_ctx;
// the grammar compiler over the tokenizer's vocabulary.
std::shared_ptr<const EngineRef> make_engine_ref(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model,
                                                 std::shared_ptr<const void> owner = nullptr);

// How long a model stays loaded after its last request ends: a duration, or for ever.
struct KeepAlive {
  std::optional<std::chrono::milliseconds> duration;  // nullopt: never unloaded for idleness
};

// Why a host gave no engine for a model. message is whole, for the client to read.
struct HostError {
  enum class Kind {
    UnknownModel,  // no model by that name
    Unservable,    // its file is listed but cannot be served (message says why)
    TooLarge,      // the model alone needs more than a memory budget
    MemoryBusy,    // the budget is held by models serving requests; later may work
    LoadFailed,    // reading the file or starting its engine failed
    ShuttingDown,  // the host loads nothing any more
  };
  Kind kind = Kind::LoadFailed;
  std::string message;
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
  ModelSampling sampling;    // its own sampling defaults (the file's, else the catalog's)
  bool available = true;     // false: the file cannot be served (reason says why)
  std::string reason;
  bool loaded = false;
  // Its unload has begun: out of service, finishing its cache writes and freeing its memory
  // (memory_bytes, still charged to the budgets), then no longer listed as loaded.
  bool unloading = false;
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
  using Loaded = std::variant<std::shared_ptr<const EngineRef>, HostError>;

  virtual ~ModelHost() = default;

  // The id a request's "model" names (an id or an alias; "" = the default model), or
  // nullopt when the host has no such model.
  virtual std::optional<std::string> resolve(std::string_view name) const = 0;
  // The engine of a loaded model; null when it is not loaded. Never blocks.
  virtual std::shared_ptr<const EngineRef> loaded(const std::string& id) = 0;
  // Loads the model when needed (concurrent callers share one load), first unloading the
  // least recently used idle models when the memory budget would be exceeded.
  virtual Loaded load(const std::string& id) = 0;
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
