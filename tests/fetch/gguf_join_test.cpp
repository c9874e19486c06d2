#include "fetch/gguf_join.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"

using namespace hearth;
using namespace hearth::fetch;

namespace {

std::vector<uint8_t> floats(std::vector<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A model in two parts as gguf-split writes it: metadata in the first, split.* in both.
struct SplitFixture {
  std::string dir = std::filesystem::temp_directory_path() / ("hearth_join_" + std::to_string(::getpid()));
  std::string part1 = dir + "/m-00001-of-00002.gguf", part2 = dir + "/m-00002-of-00002.gguf";
  std::string out = dir + "/m.gguf";
  SplitFixture() {
    std::filesystem::create_directories(dir);
    gguf::Writer a;
    a.set_string("general.architecture", "llama");
    a.set_string("general.name", "joined");
    a.set_u16("split.no", 0);
    a.set_u16("split.count", 2);
    a.set_i32("split.tensors.count", 3);
    a.set_string_array("tokenizer.ggml.tokens", {"x", "yy"});
    a.add_tensor("a", DType::F32, {8}, floats({1, 2, 3, 4, 5, 6, 7, 8}));
    a.add_tensor("b", DType::F32, {5}, floats({9, 10, 11, 12, 13}));
    REQUIRE(a.write_file(part1).ok());
    gguf::Writer b;
    b.set_u16("split.no", 1);
    b.set_u16("split.count", 2);
    b.set_i32("split.tensors.count", 3);
    b.add_tensor("c", DType::F32, {3}, floats({14, 15, 16}));
    REQUIRE(b.write_file(part2).ok());
  }
  ~SplitFixture() { std::filesystem::remove_all(dir); }
};

std::vector<float> values(const gguf::TensorInfo* t) {
  REQUIRE(t != nullptr);
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  std::memcpy(v.data(), t->data, t->n_bytes);
  return v;
}

}  // namespace

TEST_CASE("a split GGUF joins into one file with the first part's metadata and every tensor", "[fetch]") {
  SplitFixture f;
  REQUIRE(join_split_gguf({f.part1, f.part2}, f.out).ok());
  Result<std::unique_ptr<gguf::File>> g = gguf::File::open(f.out);
  REQUIRE(g.ok());
  CHECK(*(*g)->get_string("general.architecture") == "llama");
  CHECK((*g)->get_string_array("tokenizer.ggml.tokens")->size() == 2);
  CHECK(!(*g)->has("split.no"));
  CHECK(!(*g)->has("split.count"));
  REQUIRE((*g)->tensors().size() == 3);
  CHECK(values((*g)->find_tensor("a")) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(values((*g)->find_tensor("b")) == std::vector<float>{9, 10, 11, 12, 13});
  CHECK(values((*g)->find_tensor("c")) == std::vector<float>{14, 15, 16});
  for (const gguf::TensorInfo& t : (*g)->tensors()) CHECK(t.offset % (*g)->alignment() == 0);
}

TEST_CASE("parts out of order or missing do not join", "[fetch]") {
  SplitFixture f;
  Result<void> swapped = join_split_gguf({f.part2, f.part1}, f.out);
  REQUIRE(!swapped.ok());
  CHECK(swapped.error().message.find("not part 1 of 2") != std::string::npos);
  CHECK(!join_split_gguf({f.part1}, f.out).ok());
}
