// Loading what the engine serves: the weights file, the backend it runs on, the model
// bound to that backend and the tokenizer, plus the ModelInfo that /v1/models reports.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/result.h"
#include "daemon/devices.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/model_host.h"

namespace hearth::daemon {

// Members are declared in the order they must be created; they are destroyed in reverse,
// so the model's buffers go before the backend that allocated them.
struct LoadedEngine {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ipc::ModelInfo info;  // n_ctx left 0: the caller decides the context
};

// The file a --model argument names: a Hub catalog name or a Hub name of a pulled model
// (fetch/pulled.h: an error naming `hearth pull NAME` when it is not installed), else what
// engine/model/model_path.h resolve_model() takes.
Result<std::string> resolve_model_arg(const std::string& arg);

// model_arg: as resolve_model_arg takes it;
// backend: the backend and device (devices.h); chat_template: "" = the model's own
// (an unrecognised one is an error naming the override), else chatml|gemma|llama3|qwen3.
// Errors name the file and what failed.
Result<LoadedEngine> load_engine(const std::string& model_arg, const BackendChoice& backend,
                                 const std::string& chat_template = "");

// "gemma-3-270m-q4_k_m" for ".../gemma-3-270m-q4_k_m.gguf": the file name without ".gguf".
std::string model_id_from_path(const std::string& path);

// What clients send as "model" for a file: its id is the catalog's name where the file is a
// catalog model's ("gemma3:270m", as `hearth models` and GET /api/models list it), else the
// file name without ".gguf"; the other names it answers to (the file name without ".gguf"
// for a catalog model) are aliases, and so are the Hub names it was pulled by (the Hub
// catalog's name of its file, hf.co/ORG/REPO:QUANT names recorded by fetch/pulled.h).
struct ModelNames {
  std::string id;
  std::vector<std::string> aliases;
};
ModelNames model_names(const std::string& path);

}  // namespace hearth::daemon
