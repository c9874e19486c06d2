// A model file's sampling defaults: the general.sampling.* keys llama.cpp's converter writes
// (from the model's generation_config.json), else its catalog family's (catalog.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/sampling/defaults.h"

namespace hearth {

// The file's general.sampling.{temp, top_k, top_p, min_p, penalty_repeat, penalty_last_n}
// (any numeric type). A key of the wrong type or out of range is left out and described in
// *warnings; the others still count.
SamplingDefaults read_gguf_sampling(const gguf::File& f, std::vector<std::string>* warnings);

// The defaults in force for a model: the file's keys, each one it lacks from the catalog's
// row for catalog_name (the model's catalog name, or its id: a name's family decides), and
// where they came from.
ModelSampling model_sampling(const gguf::File& f, std::string_view catalog_name, std::vector<std::string>* warnings);

}  // namespace hearth
