// A model's own sampling defaults (engine/model/sampling_defaults.h, catalog_sampling()):
// the file's general.sampling.* keys, else its catalog family's, each field on its own.
#include "engine/model/sampling_defaults.h"

#include <catch2/catch.hpp>

#include "engine/model/catalog.h"
#include "tests/tools/synthetic_model.h"

using namespace hearth;
using hearth::test::make_synthetic_model;
using hearth::test::SyntheticOptions;

namespace {

// A tiny synthetic model carrying these keys, opened from memory.
struct FileWithKeys {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  FileWithKeys(std::vector<std::pair<std::string, float>> f32, std::vector<std::pair<std::string, int32_t>> i32,
               std::string arch = "llama") {
    SyntheticOptions o;
    o.arch = std::move(arch);
    o.extra_f32 = std::move(f32);
    o.extra_i32 = std::move(i32);
    Result<std::vector<uint8_t>> b = make_synthetic_model(o);
    REQUIRE(b.ok());
    bytes = std::move(*b);
    Result<std::unique_ptr<gguf::File>> f = gguf::File::from_memory(bytes.data(), bytes.size());
    REQUIRE(f.ok());
    file = std::move(*f);
  }
};

// The keys llama.cpp's converter writes for Qwen3-8B (its generation_config.json).
const std::vector<std::pair<std::string, float>> kQwen3Floats{
    {"general.sampling.temp", 0.6f}, {"general.sampling.top_p", 0.95f}, {"general.sampling.min_p", 0.0f}};
const std::vector<std::pair<std::string, int32_t>> kQwen3Ints{{"general.sampling.top_k", 20}};

}  // namespace

TEST_CASE("a file's general.sampling keys are its sampling defaults") {
  FileWithKeys m({{"general.sampling.temp", 0.6f},
                  {"general.sampling.top_p", 0.95f},
                  {"general.sampling.min_p", 0.0f},
                  {"general.sampling.penalty_repeat", 1.1f}},
                 {{"general.sampling.top_k", 20}, {"general.sampling.penalty_last_n", 128}});
  std::vector<std::string> warnings;
  const ModelSampling s = model_sampling(*m.file, "", &warnings);
  CHECK(warnings.empty());
  CHECK(s.source == "gguf");
  CHECK(s.defaults.temperature == 0.6f);
  CHECK(s.defaults.top_k == 20);
  CHECK(s.defaults.top_p == 0.95f);
  CHECK(s.defaults.min_p == 0.0f);  // a stated zero is a value, not "unset"
  CHECK(s.defaults.repetition_penalty == 1.1f);
  CHECK(s.defaults.penalty_last_n == 128);
  CHECK_FALSE(s.no_thinking);
  CHECK(describe_defaults(s) ==
        "temperature 0.6, top_k 20, top_p 0.95, min_p 0, repetition_penalty 1.1, penalty_last_n 128 (gguf)");
}

TEST_CASE("a file without general.sampling keys has no defaults of its own") {
  FileWithKeys m({}, {});
  std::vector<std::string> warnings;
  CHECK(read_gguf_sampling(*m.file, &warnings).empty());
  const ModelSampling s = model_sampling(*m.file, "some-model", &warnings);
  CHECK(s.defaults.empty());
  CHECK(s.source.empty());
  CHECK(describe_defaults(s) == "none");
}

TEST_CASE("a sampling key out of range or of the wrong type is ignored with a warning, the others count") {
  SyntheticOptions o;
  FileWithKeys m({{"general.sampling.temp", -1.0f}, {"general.sampling.top_p", 0.8f}},
                 {{"general.sampling.penalty_last_n", -5}});
  std::vector<std::string> warnings;
  const SamplingDefaults d = read_gguf_sampling(*m.file, &warnings);
  CHECK_FALSE(d.temperature);
  CHECK_FALSE(d.penalty_last_n);
  CHECK(d.top_p == 0.8f);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("general.sampling.temp") != std::string::npos);
  CHECK(warnings[1].find("general.sampling.penalty_last_n") != std::string::npos);
}

TEST_CASE("a file without keys takes its catalog family's defaults: Qwen2.5's for the default model") {
  FileWithKeys m({}, {});
  std::vector<std::string> warnings;
  const ModelSampling s = model_sampling(*m.file, "qwen2.5-coder:0.5b", &warnings);
  CHECK(s.source == "catalog");
  CHECK(s.defaults.temperature == 0.7f);
  CHECK(s.defaults.top_p == 0.8f);
  CHECK(s.defaults.top_k == 20);
  CHECK(s.defaults.repetition_penalty == 1.05f);
  CHECK_FALSE(s.defaults.min_p);  // Qwen does not name one: the API's own default applies
  // The built-in catalog's entry carries the same.
  const CatalogModel* entry = find_catalog_model("qwen2.5-coder:0.5b");
  REQUIRE(entry != nullptr);
  CHECK(entry->sampling.defaults == s.defaults);
  CHECK(find_catalog_model("gemma3:270m")->sampling.defaults.top_k == 64);
  CHECK(find_catalog_model("smollm2:135m")->sampling.defaults.temperature == 0.2f);
  // A family hearth knows nothing of: none.
  CHECK(catalog_sampling("mistral:7b").defaults.empty());
  CHECK(catalog_sampling("qwen2.5-coderx:1b").defaults.empty());
}

TEST_CASE("Qwen3 has other defaults without thinking, the file's keys win, the catalog fills the rest") {
  FileWithKeys none({}, {});
  std::vector<std::string> warnings;
  const ModelSampling c = model_sampling(*none.file, "qwen3:8b", &warnings);
  CHECK(c.defaults.temperature == 0.6f);
  CHECK(c.defaults.top_p == 0.95f);
  REQUIRE(c.no_thinking);
  CHECK(c.no_thinking->temperature == 0.7f);
  CHECK(c.no_thinking->top_p == 0.8f);
  CHECK(c.no_thinking->min_p == 0.0f);

  FileWithKeys qwen3(kQwen3Floats, kQwen3Ints);
  CHECK(model_sampling(*qwen3.file, "qwen3:8b", &warnings).source == "gguf");

  // Only a temperature in the file: the catalog gives the rest.
  FileWithKeys partial({{"general.sampling.temp", 0.5f}}, {});
  const ModelSampling p = model_sampling(*partial.file, "qwen2.5:7b", &warnings);
  CHECK(p.source == "gguf+catalog");
  CHECK(p.defaults.temperature == 0.5f);
  CHECK(p.defaults.top_k == 20);
  CHECK(p.defaults.repetition_penalty == 1.05f);
  CHECK(warnings.empty());
}

TEST_CASE("a qwen3 file named by its file, not the catalog, takes Qwen3's defaults from its architecture") {
  FileWithKeys pulled({}, {}, "qwen3");
  std::vector<std::string> warnings;
  const ModelSampling s = model_sampling(*pulled.file, "Qwen3-8B-Q4_K_M", &warnings);
  CHECK(s.source == "catalog");
  CHECK(s.defaults.temperature == 0.6f);
  REQUIRE(s.no_thinking);
  CHECK(s.no_thinking->temperature == 0.7f);
  // Other architectures named by their file keep the API's defaults.
  FileWithKeys other({}, {}, "qwen2");
  CHECK(model_sampling(*other.file, "Some-Qwen2-Q4_K_M", &warnings).source.empty());
}
