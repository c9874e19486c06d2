// Where models live and how a -m argument names one.
#pragma once

#include <string>

#include "common/result.h"

namespace hearth {

inline constexpr const char* kDefaultModelFile = "gemma-3-270m-q4_k_m.gguf";

// ${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}
std::string models_dir();

// A path to an existing file, or a model name in models_dir() (with or without ".gguf");
// empty = the default model.
Result<std::string> resolve_model(const std::string& arg);

}  // namespace hearth
