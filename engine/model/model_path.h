// Where models live and how a --model argument names one.
#pragma once

#include <string>

#include "common/result.h"

namespace hearth {

// ${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}
std::string models_dir();

// The file a --model argument names, tried in this order:
//   ""                      the catalog's default model (qwen2.5-coder:0.5b) in models_dir()
//   a path to a file        that file
//   a catalog name          its file in models_dir() ("smollm2:135m")
//   a name in models_dir()  with or without ".gguf"
// A catalog model that is not installed is an error saying how to fetch it; an unknown name
// lists the catalog's names.
Result<std::string> resolve_model(const std::string& arg);

}  // namespace hearth
