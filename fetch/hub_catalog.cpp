#include "fetch/hub_catalog.h"

namespace hearth::fetch {

// Repos and file names checked against public references to them (December 2026); sizes of
// the Q4_K_M / Q8_0 files rounded. RAM: the file, plus about 1 GiB for the KV cache of a few
// thousand tokens and working memory (more for the larger models' wider KV).
const std::vector<HubCatalogModel>& hub_catalog() {
  static const std::vector<HubCatalogModel> kModels = {
      {"qwen3:0.6b", "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "qwen3", 0.6, 2, "Apache-2.0",
       "Qwen3 0.6B, Q8_0: thinking and non-thinking chat on the smallest machines"},
      {"qwen3:1.7b", "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf", "qwen3", 1.7, 3, "Apache-2.0",
       "Qwen3 1.7B, Q8_0: a small chat and reasoning model"},
      {"qwen3:4b", "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf", "qwen3", 2.3, 4, "Apache-2.0",
       "Qwen3 4B, Q4_K_M: chat, code and reasoning on 8 GB machines"},
      {"qwen3:8b", "Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", "qwen3", 4.7, 7, "Apache-2.0",
       "Qwen3 8B, Q4_K_M: a strong all-round model for 16 GB machines"},
      {"qwen3:30b-a3b", "Qwen/Qwen3-30B-A3B-GGUF", "Qwen3-30B-A3B-Q4_K_M.gguf", "qwen3moe", 17.3, 20, "Apache-2.0",
       "Qwen3 30B-A3B, Q4_K_M: mixture of experts, 30B quality at the decode cost of 3B (32 GB)"},
      {"llama3.2:3b", "bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama-3.2-3B-Instruct-Q4_K_M.gguf", "llama", 1.9, 4,
       "Llama 3.2 Community License", "Llama 3.2 3B Instruct, Q4_K_M: quick everyday answers"},
      {"llama3.1:8b", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama",
       4.6, 7, "Llama 3.1 Community License", "Llama 3.1 8B Instruct, Q4_K_M: a well-known 8B baseline"},
      {"gemma3:4b", "unsloth/gemma-3-4b-it-GGUF", "gemma-3-4b-it-Q4_K_M.gguf", "gemma3", 2.3, 4, "Gemma Terms of Use",
       "Gemma 3 4B it, Q4_K_M: multilingual chat (text only in hearth)"},
      {"gemma3:12b", "unsloth/gemma-3-12b-it-GGUF", "gemma-3-12b-it-Q4_K_M.gguf", "gemma3", 6.8, 10,
       "Gemma Terms of Use", "Gemma 3 12B it, Q4_K_M: multilingual chat and writing (text only in hearth)"},
      {"mistral:7b", "bartowski/Mistral-7B-Instruct-v0.3-GGUF", "Mistral-7B-Instruct-v0.3-Q4_K_M.gguf", "llama", 4.1, 6,
       "Apache-2.0", "Mistral 7B Instruct v0.3, Q4_K_M: general chat"},
  };
  return kModels;
}

const HubCatalogModel* find_hub_catalog_model(std::string_view name) {
  for (const HubCatalogModel& m : hub_catalog())
    if (name == m.name) return &m;
  return nullptr;
}

std::string hub_name_of(const HubCatalogModel& m) {
  return std::string("hf.co/") + m.repo + "/" + m.file;
}

}  // namespace hearth::fetch
