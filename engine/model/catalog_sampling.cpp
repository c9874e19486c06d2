// The sampling each model family's publisher recommends, for GGUF files that carry no
// general.sampling.* keys (older conversions, and every file of the catalog today). Each
// row cites where its values come from; a field a publisher does not name stays unset, so
// the API's own default applies.
#include <array>

#include "engine/model/catalog.h"

namespace hearth {
namespace {

struct FamilySampling {
  std::string_view family;  // a catalog name's part before ':'
  SamplingDefaults defaults;
  std::optional<SamplingDefaults> no_thinking;
};

// Qwen2.5 and Qwen2.5-Coder Instruct: the model cards' and generation_config.json's
// temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05 (with these the 0.5B Coder
// ends its answers; greedy, it loops).
constexpr SamplingDefaults kQwen25{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .repetition_penalty = 1.05f};
// Qwen3's model card, "Best Practices": thinking mode temperature 0.6, top_p 0.95, top_k 20,
// min_p 0; non-thinking mode temperature 0.7, top_p 0.8, top_k 20, min_p 0.
constexpr SamplingDefaults kQwen3Thinking{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .min_p = 0.0f};
constexpr SamplingDefaults kQwen3NoThinking{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.0f};
// Gemma 3: Google's generation_config.json and Ollama's Modelfile: temperature 1.0,
// top_k 64, top_p 0.95.
constexpr SamplingDefaults kGemma3{.temperature = 1.0f, .top_k = 64, .top_p = 0.95f};
// SmolLM2 Instruct: the model card's example, temperature 0.2, top_p 0.9.
constexpr SamplingDefaults kSmolLM2{.temperature = 0.2f, .top_p = 0.9f};
// Llama 3.1 / 3.2 Instruct: generation_config.json, temperature 0.6, top_p 0.9.
constexpr SamplingDefaults kLlama3{.temperature = 0.6f, .top_p = 0.9f};

const std::array<FamilySampling, 9> kFamilies{{
    {"qwen2.5-coder", kQwen25, std::nullopt},
    {"qwen2.5", kQwen25, std::nullopt},
    {"qwen3", kQwen3Thinking, kQwen3NoThinking},
    // Qwen3-Coder's model card: the same as Qwen2.5's; it does not think.
    {"qwen3-coder", kQwen25, std::nullopt},
    {"gemma3", kGemma3, std::nullopt},
    {"smollm2", kSmolLM2, std::nullopt},
    {"llama3.1", kLlama3, std::nullopt},
    {"llama3.2", kLlama3, std::nullopt},
    {"llama3", kLlama3, std::nullopt},
}};

}  // namespace

ModelSampling catalog_sampling(std::string_view name) {
  const std::string_view family = name.substr(0, name.find(':'));
  for (const FamilySampling& f : kFamilies) {
    if (f.family == family) return ModelSampling{f.defaults, f.no_thinking, "catalog"};
  }
  return {};
}

}  // namespace hearth
