// One model loaded and its scheduler running, as hearthd serves it: the weights, the
// backend, the scheduler with its options (cfg's, the context capped by the model's), and
// the prompt cache's disk tier keyed by the file's fingerprint.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "daemon/config.h"
#include "daemon/engine_loader.h"
#include "engine/scheduler/scheduler.h"

namespace hearth::daemon {

// A draft model (--draft-model) loaded on its target's backend.
struct LoadedDraft {
  std::string path;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// The scheduler is declared last, so it stops (joining the engine thread) before the models
// it uses go; the draft model goes before the backend it was loaded on.
struct Serving {
  LoadedEngine engine;
  std::unique_ptr<LoadedDraft> draft;  // null: no draft model for this one
  SchedulerOptions options;
  std::unique_ptr<Scheduler> scheduler;
};

// The scheduler options cfg gives for a model: its context capped by the model's training
// context unless --ctx was set.
SchedulerOptions scheduler_options(const DaemonConfig& cfg, const ModelConfig& model);

// The backend and device cfg asks for (--backend, --threads, --vk-device, --cuda-device).
BackendChoice backend_choice(const DaemonConfig& cfg);

// Loads model_arg (a catalog name, a file name in the models folder or a path; "" = the
// default model) and starts its scheduler. Logs and reports the status to systemd.
// reconcile_cache: whether opening the prompt cache's directory reconciles it (only when no
// other loaded model writes there). With --draft-model (and --speculative not off) the draft
// model is loaded beside it: failing to load it is an error, and so is a draft model whose
// tokenizer is not this model's when draft_must_fit (the start model), else a warning and
// no draft model for this one.
Result<Serving> start_engine(const DaemonConfig& cfg, const std::string& model_arg, bool reconcile_cache = true,
                             bool draft_must_fit = true);

}  // namespace hearth::daemon
