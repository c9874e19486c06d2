// The installed-model listing (engine/model/installed.h): what GET /api/models and
// `hearth models` show for each file of the models folder.
#include "engine/model/installed.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model/catalog.h"
#include "tests/tools/synthetic_model.h"

namespace fs = std::filesystem;
using namespace hearth;
using hearth::test::make_synthetic_model;
using hearth::test::SyntheticOptions;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    char tmpl[] = "/tmp/hearth-installed-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<uint8_t> synthetic(const std::string& arch) {
  SyntheticOptions o;
  o.arch = arch;
  o.type = DType::Q8_0;
  Result<std::vector<uint8_t>> bytes = make_synthetic_model(o);
  REQUIRE(bytes.ok());
  return *bytes;
}

// The bytes with general.architecture's value ("llama") replaced by another of the same length.
std::vector<uint8_t> with_architecture(std::vector<uint8_t> bytes, const std::string& arch) {
  const std::string key = "general.architecture";
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  REQUIRE(it != bytes.end());
  const std::string old = "llama";
  auto v = std::search(it + static_cast<std::ptrdiff_t>(key.size()), bytes.end(), old.begin(), old.end());
  REQUIRE(v - it < 64);
  REQUIRE(arch.size() == old.size());
  std::copy(arch.begin(), arch.end(), v);
  return bytes;
}

const InstalledModel& find(const std::vector<InstalledModel>& ms, const std::string& id) {
  for (const InstalledModel& m : ms)
    if (m.id == id) return m;
  FAIL("no model " << id);
  throw 0;
}

}  // namespace

TEST_CASE("the models folder lists every GGUF file, with what hearth read from it or why it cannot serve it",
          "[installed]") {
  TempDir t;
  const std::vector<uint8_t> llama = synthetic("llama");
  write_bytes(t.dir / "tiny-llama.gguf", llama);
  write_bytes(t.dir / "tiny-qwen.gguf", synthetic("qwen2"));
  // A catalog model's file name: listed under its catalog name.
  const CatalogModel& c = catalog().back();
  write_bytes(t.dir / c.file, synthetic("gemma3"));
  write_bytes(t.dir / "other-arch.gguf", with_architecture(llama, "mamba"));
  write_bytes(t.dir / "broken.gguf", std::vector<uint8_t>(llama.begin(), llama.begin() + 100));
  write_bytes(t.dir / "notes.txt", {'h', 'i'});  // not a model: not listed
  fs::create_directory(t.dir / "folder.gguf");   // not a file: not listed

  const std::vector<InstalledModel> ms = scan_models(t.dir.string());
  REQUIRE(ms.size() == 5);
  for (size_t i = 1; i < ms.size(); ++i) CHECK(ms[i - 1].id < ms[i].id);

  const InstalledModel& l = find(ms, "tiny-llama");
  CHECK(l.usable);
  CHECK(l.error.empty());
  CHECK(l.file == "tiny-llama.gguf");
  CHECK(l.path == (t.dir / "tiny-llama.gguf").string());
  CHECK(l.catalog_name.empty());
  CHECK(l.arch == "llama");
  CHECK(l.bytes == static_cast<int64_t>(llama.size()));
  CHECK(l.modified > 1'600'000'000);
  CHECK(l.parameters > 100'000);  // the tiny shape: 2 layers of 128 wide, 320 tokens
  CHECK(l.context_length > 0);
  CHECK(find(ms, "tiny-qwen").arch == "qwen2");
  CHECK(find(ms, "tiny-qwen").usable);

  const InstalledModel& g = find(ms, c.name);
  CHECK(g.catalog_name == c.name);
  CHECK(g.file == c.file);
  CHECK(g.arch == "gemma3");
  CHECK(g.usable);

  const InstalledModel& o = find(ms, "other-arch");
  CHECK_FALSE(o.usable);
  CHECK(o.arch == "mamba");
  CHECK(o.error.find("architecture 'mamba' is not supported") != std::string::npos);

  const InstalledModel& b = find(ms, "broken");
  CHECK_FALSE(b.usable);
  CHECK(b.bytes == 100);
  CHECK_FALSE(b.error.empty());
  CHECK(b.arch.empty());
}

TEST_CASE("a models folder that is missing lists nothing", "[installed]") {
  CHECK(scan_models("/nonexistent/hearth-models").empty());
}

TEST_CASE("quantization names follow llama.cpp's file types", "[installed]") {
  CHECK(file_type_name(0) == "F32");
  CHECK(file_type_name(1) == "F16");
  CHECK(file_type_name(2) == "Q4_0");
  CHECK(file_type_name(3) == "Q4_1");
  CHECK(file_type_name(7) == "Q8_0");
  CHECK(file_type_name(15) == "Q4_K_M");
  CHECK(file_type_name(17) == "Q5_K_M");
  CHECK(file_type_name(18) == "Q6_K");
  CHECK(file_type_name(32) == "BF16");
  CHECK(file_type_name(4).empty());  // removed from llama.cpp
  CHECK(file_type_name(-1).empty());
  CHECK(file_type_name(1000).empty());
}
