#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "gguf_test_util.h"
#include "test_util.h"

using namespace hearth;
using namespace hearth::gguf;
using namespace hearth::gguf::test;

namespace {

template <class T>
std::vector<uint8_t> raw(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Writer every_type_writer(uint32_t version) {
  Writer w(version);
  w.set_u8("v.u8", 200);
  w.set_i8("v.i8", -100);
  w.set_u16("v.u16", 60000);
  w.set_i16("v.i16", -30000);
  w.set_u32("v.u32", 4000000000u);
  w.set_i32("v.i32", -2000000000);
  w.set_u64("v.u64", 18000000000000000000ull);
  w.set_i64("v.i64", -9000000000000000000ll);
  w.set_f32("v.f32", 0.25f);
  w.set_f64("v.f64", -1.0e300);
  w.set_bool("v.bool", true);
  w.set_bool("v.false", false);
  w.set_string("v.string", std::string("h\xC3\xA9llo\0x", 8));
  w.set_string("v.empty", "");
  w.set_array("a.u8", ValueType::U8, raw<uint8_t>({1, 255}), 2);
  w.set_array("a.i8", ValueType::I8, raw<int8_t>({-1, 127}), 2);
  w.set_array("a.u16", ValueType::U16, raw<uint16_t>({65535}), 1);
  w.set_array("a.i16", ValueType::I16, raw<int16_t>({-32768, 5}), 2);
  w.set_u32_array("a.u32", {4000000000u, 0});
  w.set_i32_array("a.i32", {-7, 7, 0});
  w.set_f32_array("a.f32", {1.5f, -2.5f});
  w.set_array("a.bool", ValueType::BOOL, {1, 0, 1}, 3);
  w.set_string_array("a.string", {"x", "", "yz"});
  w.set_array("a.u64", ValueType::U64, raw<uint64_t>({1ull << 62}), 1);
  w.set_array("a.i64", ValueType::I64, raw<int64_t>({-(1ll << 62)}), 1);
  w.set_array("a.f64", ValueType::F64, raw<double>({0.5, 3.0}), 2);
  w.set_array("a.empty", ValueType::I32, {}, 0);
  // [[1, 2], [3]] of I32
  std::vector<uint8_t> nested;
  for (const std::vector<int32_t>& inner : {std::vector<int32_t>{1, 2}, std::vector<int32_t>{3}}) {
    std::vector<uint8_t> head(12);
    uint32_t t = static_cast<uint32_t>(ValueType::I32);
    uint64_t n = inner.size();
    std::memcpy(head.data(), &t, 4);
    std::memcpy(head.data() + 4, &n, 8);
    nested.insert(nested.end(), head.begin(), head.end());
    auto body = raw(inner);
    nested.insert(nested.end(), body.begin(), body.end());
  }
  w.set_array("a.nested", ValueType::ARRAY, nested, 2);
  return w;
}

}  // namespace

TEST_CASE("every metadata type round-trips through writer and reader, v2 and v3", "[gguf]") {
  for (uint32_t version : {2u, 3u}) {
    INFO("version " << version);
    auto bytes = every_type_writer(version).serialize();
    auto r = load(bytes);
    REQUIRE(r.ok());
    const File& f = **r;
    CHECK(f.version() == version);
    CHECK(f.alignment() == 32);
    CHECK(f.tensors().empty());

    CHECK(*f.get_uint("v.u8") == 200);
    CHECK(*f.get_int("v.i8") == -100);
    CHECK(*f.get_uint("v.u16") == 60000);
    CHECK(*f.get_int("v.i16") == -30000);
    CHECK(*f.get_uint("v.u32") == 4000000000u);
    CHECK(*f.get_int("v.i32") == -2000000000);
    CHECK(*f.get_uint("v.u64") == 18000000000000000000ull);
    CHECK(*f.get_int("v.i64") == -9000000000000000000ll);
    CHECK(*f.get_float("v.f32") == 0.25);
    CHECK(*f.get_float("v.f64") == -1.0e300);
    CHECK(*f.get_float("v.i32") == -2000000000.0);
    CHECK(*f.get_bool("v.bool") == true);
    CHECK(*f.get_bool("v.false") == false);
    CHECK(*f.get_string("v.string") == std::string_view("h\xC3\xA9llo\0x", 8));
    CHECK(f.get_string("v.empty")->empty());

    CHECK(*f.get_int_array("a.u8") == std::vector<int64_t>{1, 255});
    CHECK(*f.get_int_array("a.i8") == std::vector<int64_t>{-1, 127});
    CHECK(*f.get_int_array("a.u16") == std::vector<int64_t>{65535});
    CHECK(*f.get_int_array("a.i16") == std::vector<int64_t>{-32768, 5});
    CHECK(*f.get_int_array("a.u32") == std::vector<int64_t>{4000000000ll, 0});
    CHECK(*f.get_int_array("a.i32") == std::vector<int64_t>{-7, 7, 0});
    CHECK(*f.get_int_array("a.bool") == std::vector<int64_t>{1, 0, 1});
    CHECK(*f.get_int_array("a.u64") == std::vector<int64_t>{1ll << 62});
    CHECK(*f.get_int_array("a.i64") == std::vector<int64_t>{-(1ll << 62)});
    CHECK(*f.get_f32_array("a.f32") == std::vector<float>{1.5f, -2.5f});
    CHECK(*f.get_f32_array("a.f64") == std::vector<float>{0.5f, 3.0f});
    CHECK(*f.get_string_array("a.string") == std::vector<std::string_view>{"x", "", "yz"});
    CHECK(f.get_int_array("a.empty")->empty());

    CHECK(f.type_of("a.nested") == ValueType::ARRAY);
    CHECK(f.array_elem_type("a.nested") == ValueType::ARRAY);
    CHECK(f.array_length("a.nested") == 2u);
    CHECK(f.array_elem_type("a.f64") == ValueType::F64);
    CHECK(f.array_length("a.string") == 3u);
    CHECK(f.type_of("v.u16") == ValueType::U16);
    CHECK(!f.array_length("v.u16"));
    CHECK(!f.type_of("missing"));

    auto keys = f.keys();
    REQUIRE(keys.size() == 28);
    CHECK(keys.front() == "v.u8");
    CHECK(keys.back() == "a.nested");
  }
}

TEST_CASE("getters reject the wrong type and out-of-range values with the key's byte offset", "[gguf]") {
  auto bytes = every_type_writer(3).serialize();
  auto r = load(bytes);
  REQUIRE(r.ok());
  const File& f = **r;
  auto e = f.get_string("v.u32");
  REQUIRE(!e.ok());
  CHECK_THAT(e.error().message,
             Catch::Contains("v.u32") && Catch::Contains("expected STRING") && Catch::Contains("byte"));
  CHECK(!f.get_uint("v.i8").ok());  // negative
  CHECK(!f.get_int("v.u64").ok());  // above INT64_MAX
  CHECK(!f.get_bool("v.u8").ok());
  CHECK(!f.get_float("v.string").ok());
  CHECK(!f.get_string_array("a.i32").ok());
  CHECK(!f.get_f32_array("a.i32").ok());
  CHECK(!f.get_int_array("a.f32").ok());
  CHECK(!f.get_int_array("a.nested").ok());
  auto missing = f.get_uint("nope");
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("not found"));

  CHECK(*f.get_uint_or("nope", 7) == 7);
  CHECK(*f.get_float_or("nope", 0.5) == 0.5);
  CHECK(*f.get_bool_or("nope", true) == true);
  CHECK(*f.get_uint_or("v.u16", 7) == 60000);
  CHECK(!f.get_uint_or("v.string", 7).ok());
  CHECK(!f.get_float_or("v.bool", 1.0).ok());
  CHECK(!f.get_bool_or("v.u8", false).ok());
}

TEST_CASE("a BOOL byte other than 0 or 1 is an error when read, not a crash", "[gguf]") {
  Writer w;
  w.set_raw("b", ValueType::BOOL, {2});
  auto bytes = w.serialize();
  auto r = load(bytes);
  REQUIRE(r.ok());
  auto b = (*r)->get_bool("b");
  REQUIRE(!b.ok());
  CHECK_THAT(b.error().message, Catch::Contains("byte"));
}

TEST_CASE("tensor data reads back equal, aligned to a custom alignment, v2 and v3", "[gguf]") {
  for (uint32_t version : {2u, 3u}) {
    for (uint64_t alignment : {32u, 64u, 1u, 4096u}) {
      INFO("version " << version << " alignment " << alignment);
      Writer w(version);
      w.set_alignment(alignment);
      w.set_string("general.architecture", "tiny");
      auto a = filled(4 * 8 * 3, 1), b = filled(34 * 2 * 2, 2), c = filled(144, 3), d = filled(2 * 16 * 2 * 3, 4);
      auto e = filled(2 * 5, 5), g = filled(210 * 2, 6);
      w.add_tensor("a", DType::F32, {8, 3}, a);
      w.add_tensor("b", DType::Q8_0, {64, 2}, b);
      w.add_tensor("c", DType::Q4_K, {256}, c);
      w.add_tensor("d", DType::F16, {16, 2, 3, 1}, d);
      w.add_tensor("e", DType::BF16, {5}, e);
      w.add_tensor("g", DType::Q6_K, {256, 2}, g);
      auto bytes = w.serialize();
      auto r = load(bytes);
      REQUIRE(r.ok());
      const File& f = **r;
      CHECK(f.alignment() == alignment);
      CHECK(*f.get_uint("general.alignment") == alignment);
      CHECK(f.type_of("general.alignment") == ValueType::U32);
      CHECK(f.data_offset() % alignment == 0);
      REQUIRE(f.tensors().size() == 6);
      CHECK(f.tensors()[0].name == "a");  // file order
      const std::pair<const char*, const std::vector<uint8_t>*> expect[] = {{"a", &a}, {"b", &b}, {"c", &c},
                                                                            {"d", &d}, {"e", &e}, {"g", &g}};
      for (auto [name, data] : expect) {
        const TensorInfo* t = f.find_tensor(name);
        REQUIRE(t);
        CHECK(t->n_bytes == data->size());
        CHECK(t->offset % alignment == 0);
        CHECK(t->data == f.base() + f.data_offset() + t->offset);
        CHECK(std::vector<uint8_t>(t->data, t->data + t->n_bytes) == *data);
      }
      const TensorInfo* d_info = f.find_tensor("d");
      CHECK(d_info->n_dims == 4);
      CHECK(d_info->ne[0] == 16);
      CHECK(d_info->ne[2] == 3);
      CHECK(d_info->n_elements() == 96);
      CHECK(d_info->n_rows() == 6);
      CHECK(d_info->type == DType::F16);
      const TensorInfo* b_info = f.find_tensor("b");
      CHECK(b_info->n_dims == 2);
      CHECK(b_info->ne[2] == 1);
      CHECK(b_info->ne[3] == 1);
      CHECK(f.find_tensor("zzz") == nullptr);
    }
  }
}

TEST_CASE("write_file then open maps the same file", "[gguf]") {
  auto dir = std::filesystem::temp_directory_path() / ("hearth_gguf_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "tiny.gguf").string();
  Writer w = small_writer();
  REQUIRE(w.write_file(path).ok());
  CHECK(!std::filesystem::exists(path + ".tmp"));
  auto r = File::open(path);
  REQUIRE(r.ok());
  CHECK((*r)->path() == path);
  CHECK((*r)->size() == w.serialize().size());
  CHECK(*(*r)->get_string("general.architecture") == "tiny");
  CHECK((*r)->tensors().size() == 3);

  auto missing = File::open((dir / "missing.gguf").string());
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("missing.gguf"));
  auto directory = File::open(dir.string());
  CHECK(!directory.ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("the default model (Gemma 3 270M Q4_K_M) loads with the expected metadata and tensors", "[gguf][model]") {
  std::string path = hearth::test::gemma_model_path();
  if (path.empty()) {
    WARN("default model not installed; skipping");
    return;
  }
  auto r = File::open(path);
  REQUIRE(r.ok());
  const File& f = **r;
  CHECK(f.version() == 3);
  CHECK(*f.get_string("general.architecture") == "gemma3");
  CHECK(*f.get_uint("gemma3.block_count") == 18);
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.ok());
  CHECK(tokens->size() == 262144);
  CHECK(f.tensors().size() == 236);
  const std::set<DType> allowed = {DType::F32, DType::Q8_0, DType::Q5_0, DType::Q4_K, DType::Q6_K};
  for (const TensorInfo& t : f.tensors()) {
    INFO(t.name << " " << dtype_name(t.type));
    CHECK(allowed.count(t.type));
    CHECK(t.data + t.n_bytes <= f.base() + f.size());
  }
  CHECK(f.find_tensor("token_embd.weight"));
}
