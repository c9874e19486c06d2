// Which installed file a Hub name means, without the network: `hearthd --model qwen3:8b` or
// `--model hf.co/ORG/REPO:QUANT` after `hearth pull` (or POST /api/pull) installed it.
//
// A name that names its file (a Hub catalog name, hf.co/ORG/REPO/FILE.gguf, a resolve URL)
// means that file's base name in the models folder. A repo and a quantization
// (hf.co/ORG/REPO:QUANT, or hf.co/ORG/REPO for its default) mean the file the Hub's listing
// chose when it was pulled: pull_model records it in <models>/.pulled/<key>, a file holding
// the installed file's name and the name as the pull gave it, a line each (key: the name in
// lower case, '/' and ':' written '~' and '='; names are matched without case).
// A file pulled before those records existed is found when exactly one file in the folder
// has that quantization and starts with the repo's name less its "-GGUF".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "fetch/hub.h"

namespace hearth::fetch {

// Records that name (a repo and quantization form) installed file; other names record
// nothing. Best effort: a record that cannot be written costs only the offline lookup.
void record_pull(const std::string& models_dir, std::string_view name, const std::string& file);

// nullopt when name is not a Hub name or a Hub catalog name (the caller tries its other
// meanings); else the installed file's path, or an error saying it is not installed and
// naming `hearth pull NAME`.
std::optional<Result<std::string>> find_pulled(const std::string& models_dir, std::string_view name);

// The Hub names a file of the models folder answers to: the catalog names of that file and
// the recorded repo names that chose it, as their pulls gave them.
std::vector<std::string> pulled_names(const std::string& models_dir, const std::string& file);

}  // namespace hearth::fetch
