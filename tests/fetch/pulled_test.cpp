// Which installed file a Hub name means without the network (fetch/pulled.h): what
// `hearthd --model NAME` and `hearth show NAME` use after a pull.
#include "fetch/pulled.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace hearth;
using namespace hearth::fetch;
namespace fs = std::filesystem;

namespace {

void touch(const fs::path& p) {
  std::ofstream(p) << "GGUF";
}

}  // namespace

TEST_CASE("a pulled repo and quantization names the file its pull chose", "[fetch]") {
  test::TempDir dir;
  const std::string models = dir.path().string();
  touch(dir.path() / "model-Q4_K_M.gguf");
  record_pull(models, "hf.co/org/good:q4_k_m", "model-Q4_K_M.gguf");
  for (const char* name : {"hf.co/org/good:Q4_K_M", "hf.co/Org/Good:q4_k_m", "huggingface.co/org/good:Q4_K_M"}) {
    std::optional<Result<std::string>> found = find_pulled(models, name);
    REQUIRE(found);
    INFO(name);
    REQUIRE(*found);
    CHECK(**found == models + "/model-Q4_K_M.gguf");
  }
  CHECK(pulled_names(models, "model-Q4_K_M.gguf") == std::vector<std::string>{"hf.co/org/good:q4_k_m"});  // as pulled
  CHECK(pulled_names(models, "other.gguf").empty());
  // The default quantization is a name of its own.
  std::optional<Result<std::string>> plain = find_pulled(models, "hf.co/org/good");
  REQUIRE(plain);
  CHECK_FALSE(*plain);
}

TEST_CASE("a Hub name that is not installed says to pull it", "[fetch]") {
  test::TempDir dir;
  const std::string models = dir.path().string();
  for (const char* name : {"qwen3:8b", "hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M", "hf.co/org/repo/sub/x-Q8_0.gguf"}) {
    std::optional<Result<std::string>> found = find_pulled(models, name);
    REQUIRE(found);
    REQUIRE_FALSE(*found);
    INFO(found->error().message);
    CHECK(found->error().message.find(std::string("hearth pull ") + name) != std::string::npos);
  }
  // A recorded file that is gone is not installed either.
  record_pull(models, "hf.co/org/gone:Q8_0", "gone-Q8_0.gguf");
  CHECK_FALSE(*find_pulled(models, "hf.co/org/gone:Q8_0"));
}

TEST_CASE("names that name their file find it, other names are not the Hub's", "[fetch]") {
  test::TempDir dir;
  const std::string models = dir.path().string();
  touch(dir.path() / "Qwen3-8B-Q4_K_M.gguf");
  touch(dir.path() / "x-Q8_0.gguf");
  CHECK(**find_pulled(models, "qwen3:8b") == models + "/Qwen3-8B-Q4_K_M.gguf");
  CHECK(**find_pulled(models, "hf.co/org/repo/sub/x-Q8_0.gguf") == models + "/x-Q8_0.gguf");
  CHECK(**find_pulled(models, "https://huggingface.co/org/repo/resolve/main/x-Q8_0.gguf") == models + "/x-Q8_0.gguf");
  CHECK(pulled_names(models, "Qwen3-8B-Q4_K_M.gguf") == std::vector<std::string>{"qwen3:8b"});
  CHECK_FALSE(find_pulled(models, "x-Q8_0"));
  CHECK_FALSE(find_pulled(models, "smollm2:135m"));  // the PyPI catalog's: model_path.h
  CHECK_FALSE(find_pulled(models, "/abs/path.gguf"));
}

TEST_CASE("a file pulled before records is found by its repo's name and quantization, when only one fits", "[fetch]") {
  test::TempDir dir;
  const std::string models = dir.path().string();
  touch(dir.path() / "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf");
  touch(dir.path() / "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf");
  const std::string name = "hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M";
  CHECK(**find_pulled(models, name) == models + "/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf");
  touch(dir.path() / "Meta-Llama-3.1-8B-Instruct-abliterated-Q4_K_M.gguf");
  CHECK_FALSE(*find_pulled(models, name));  // two fit: no guess
}

TEST_CASE("a record holding anything but a plain .gguf file name is ignored", "[fetch]") {
  test::TempDir dir;
  const std::string models = dir.path().string();
  fs::create_directories(dir.path() / ".pulled");
  std::ofstream(dir.path() / ".pulled" / "hf.co~org~evil=q4_k_m") << "../../etc/passwd\n";
  touch(dir.path() / "unrelated-Q4_K_M.gguf");
  CHECK_FALSE(*find_pulled(models, "hf.co/org/evil:Q4_K_M"));
  record_pull(models, "hf.co/org/evil:Q4_K_M", "../x-Q4_K_M.gguf");  // refused
  CHECK_FALSE(*find_pulled(models, "hf.co/org/evil:Q4_K_M"));
}
