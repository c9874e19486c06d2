// Each test damages one field of a small valid file and checks the load fails with a message
// naming the problem and the byte offset of the field.
#include <catch2/catch.hpp>

#include "gguf_test_util.h"

using namespace hearth;
using namespace hearth::gguf;
using namespace hearth::gguf::test;
using Catch::Contains;

namespace {

std::string load_error(const std::vector<uint8_t>& b) {
  auto r = load(b);
  if (r.ok()) return "";
  return r.error().message;
}

// The message names the problem and the byte offset at which the bad field was read.
void check_error(const std::vector<uint8_t>& b, const std::string& problem, size_t at) {
  std::string msg = load_error(b);
  INFO(msg);
  REQUIRE(!msg.empty());
  CHECK_THAT(msg, Contains(problem));
  CHECK_THAT(msg, Contains("(at byte " + std::to_string(at) + ")"));
  CHECK(msg.rfind("gguf: ", 0) == 0);
}

constexpr uint64_t kHuge = 1ull << 60;

}  // namespace

TEST_CASE("the small test file is valid and ends where its last tensor's data ends", "[gguf]") {
  auto b = small_file();
  auto r = load(b);
  REQUIRE(r.ok());
  const TensorInfo* c = (*r)->find_tensor("t.c");
  REQUIRE(c);
  CHECK(c->data + c->n_bytes == (*r)->base() + b.size());
}

TEST_CASE("a file truncated at any byte fails to load with an error, never a crash", "[gguf]") {
  for (uint32_t version : {2u, 3u}) {
    auto b = small_file(version);
    for (size_t n = 0; n < b.size(); ++n) {
      std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(n));
      std::string msg = load_error(cut);
      INFO("truncated to " << n << " of " << b.size() << " bytes");
      REQUIRE(!msg.empty());
      CHECK_THAT(msg, Contains("byte"));
    }
  }
}

TEST_CASE("a wrong magic is rejected as not a GGUF file", "[gguf]") {
  auto b = small_file();
  b[3] = 'X';
  check_error(b, "bad magic 'GGUX'", 0);
  b.resize(2);
  check_error(b, "too small", 0);
}

TEST_CASE("versions 1 and 4 are rejected naming the version", "[gguf]") {
  auto b = small_file();
  poke<uint32_t>(b, 4, 1);
  check_error(b, "unsupported GGUF version 1", 4);
  poke<uint32_t>(b, 4, 4);
  check_error(b, "unsupported GGUF version 4", 4);
  poke<uint32_t>(b, 4, 0x03000000);
  check_error(b, "big-endian", 4);
}

TEST_CASE("absurd tensor and metadata counts are rejected before allocating", "[gguf]") {
  auto b = small_file();
  poke<uint64_t>(b, 8, kHuge);
  check_error(b, "tensor count 1152921504606846976 cannot fit", 8);
  b = small_file();
  poke<uint64_t>(b, 16, kHuge);
  check_error(b, "metadata count 1152921504606846976 cannot fit", 16);
  b = small_file();
  poke<uint64_t>(b, 8, ~0ull);
  check_error(b, "cannot fit", 8);
}

TEST_CASE("absurd string lengths are rejected", "[gguf]") {
  auto b = small_file();
  poke<uint64_t>(b, 24, kHuge);  // the first key's length
  check_error(b, "string length 1152921504606846976 exceeds", 24);

  b = small_file();
  size_t value = after_string(b, "general.architecture") + 4;
  poke<uint64_t>(b, value, kHuge);
  check_error(b, "key 'general.architecture': string length", value);

  b = small_file();
  size_t name = after_string(b, "t.b") - 3 - 8;
  poke<uint64_t>(b, name, ~0ull);
  check_error(b, "tensor 1 name: string length", name);
}

TEST_CASE("a file cut inside a string's length or a scalar names the field it cut", "[gguf]") {
  // No tensors, and a long first key, so the header's counts fit what is left of the cut file.
  Writer w;
  w.set_u32("tiny.a_key_with_a_name_long_enough_to_pass_the_header_checks", 7);
  w.set_string_array("tokenizer.tokens", {"a", "bc", "def"});
  const std::vector<uint8_t> b = w.serialize();
  const size_t u32 = after_string(b, "tiny.a_key_with_a_name_long_enough_to_pass_the_header_checks") + 4;
  std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(u32 + 2));
  check_error(cut, "U32 value needs 4 bytes but only 2 remain", u32);
  const size_t token = after_string(b, "bc");  // the third token's length follows
  cut.assign(b.begin(), b.begin() + static_cast<long>(token + 5));
  check_error(cut, "key 'tokenizer.tokens': string length needs 8 bytes but only 5 remain", token);
  const size_t key = u32 + 4;  // the second key's length
  cut.assign(b.begin(), b.begin() + static_cast<long>(key + 3));
  check_error(cut, "metadata key 1: string length needs 8 bytes but only 3 remain", key);
}

TEST_CASE("absurd array lengths are rejected", "[gguf]") {
  auto b = small_file();
  size_t count = after_string(b, "tiny.arr") + 4 + 4;
  poke<uint64_t>(b, count, kHuge);
  check_error(b, "key 'tiny.arr': array of 1152921504606846976 I32 elements cannot fit", count);

  b = small_file();
  count = after_string(b, "tokenizer.tokens") + 4 + 4;
  poke<uint64_t>(b, count, kHuge);
  check_error(b, "array of 1152921504606846976 STRING elements cannot fit", count);
  // A string array whose count fits the bytes but whose strings run past the end.
  poke<uint64_t>(b, count, 1000);
  std::string msg = load_error(b);
  CHECK_THAT(msg, Contains("byte"));
}

TEST_CASE("unknown metadata value types are rejected", "[gguf]") {
  auto b = small_file();
  size_t type = after_string(b, "tiny.block_count");
  poke<uint32_t>(b, type, 13);
  check_error(b, "key 'tiny.block_count': unknown value type 13", type);
  b = small_file();
  type = after_string(b, "tiny.arr") + 4;
  poke<uint32_t>(b, type, 0xffffffffu);
  check_error(b, "unknown value type 4294967295", type);
}

TEST_CASE("arrays nested too deeply are rejected", "[gguf]") {
  // 20 levels of [ [ ... [] ... ] ], each level one element.
  std::vector<uint8_t> payload;
  for (int depth = 0; depth < 20; ++depth) {
    std::vector<uint8_t> outer(12);
    uint32_t t = depth == 0 ? static_cast<uint32_t>(ValueType::I32) : static_cast<uint32_t>(ValueType::ARRAY);
    uint64_t n = depth == 0 ? 0 : 1;
    std::memcpy(outer.data(), &t, 4);
    std::memcpy(outer.data() + 4, &n, 8);
    outer.insert(outer.end(), payload.begin(), payload.end());
    payload = outer;
  }
  Writer w;
  w.set_array("deep", ValueType::ARRAY, payload, 1);
  auto b = w.serialize();
  check_error(b, "nested deeper than 8", after_string(b, "deep") + 4 + 12 * 8);
}

TEST_CASE("duplicate metadata keys are rejected", "[gguf]") {
  Writer w;
  w.set_u32("dup.aaa", 1);
  w.set_u32("dup.bbb", 2);
  auto b = w.serialize();
  size_t second = after_string(b, "dup.bbb");
  std::memcpy(b.data() + second - 3, "aaa", 3);
  check_error(b, "duplicate metadata key 'dup.aaa'", second - 7 - 8);
}

TEST_CASE("general.alignment must be a power of two", "[gguf]") {
  Writer w;
  w.set_alignment(64);
  auto b = w.serialize();
  size_t value = after_string(b, "general.alignment") + 4;
  poke<uint32_t>(b, value, 48);
  check_error(b, "general.alignment 48 is not a power of two", value);
  poke<uint32_t>(b, value, 0);
  check_error(b, "general.alignment 0 is not a power of two", value);
  w.set_string("general.alignment", "x");
  std::string msg = load_error(w.serialize());
  CHECK_THAT(msg, Contains("general.alignment") && Contains("expected an integer"));
}

TEST_CASE("tensor offsets past the end of the file are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.c");
  poke<uint64_t>(b, f.offset, 1ull << 20);
  check_error(b, "tensor 't.c': data [", f.offset);
  check_error(b, "extends past end of file (size " + std::to_string(b.size()) + ")", f.offset);
  poke<uint64_t>(b, f.offset, ~0ull << 5);  // aligned, and data_offset + offset overflows
  check_error(b, "extends past end of file", f.offset);
}

TEST_CASE("unaligned tensor offsets are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.b");
  poke<uint64_t>(b, f.offset, peek<uint64_t>(b, f.offset) + 4);
  check_error(b, "tensor 't.b': offset 132 is not a multiple of the alignment 32", f.offset);
}

TEST_CASE("unknown tensor type ids are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.a");
  poke<uint32_t>(b, f.type, 99);
  check_error(b, "tensor 't.a': unknown tensor type id 99", f.type);
  poke<uint32_t>(b, f.type, 4);  // Q4_2, removed from ggml long ago
  check_error(b, "unknown tensor type id 4", f.type);
}

TEST_CASE("known but unsupported tensor types are rejected naming the tensor and type", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.a");
  poke<uint32_t>(b, f.type, static_cast<uint32_t>(DType::Q2_K));
  check_error(b, "tensor 't.a': tensor type Q2_K is not supported", f.type);
  poke<uint32_t>(b, f.type, static_cast<uint32_t>(DType::I32));
  check_error(b, "tensor type I32 is not supported", f.type);
}

TEST_CASE("a row length that is not a multiple of the block size is rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.a");  // F32 [8, 4]
  poke<uint32_t>(b, f.type, static_cast<uint32_t>(DType::Q8_0));
  check_error(b, "tensor 't.a': row length 8 is not a multiple of the Q8_0 block size 32", f.type);
}

TEST_CASE("a shape larger than the tensor's data is rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.c");  // last tensor, F16 [16, 2]
  poke<uint64_t>(b, f.ne + 8, 3);
  check_error(b, "tensor 't.c': data [", f.offset);
}

TEST_CASE("overlapping tensors are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.c");
  poke<uint64_t>(b, f.offset, 96);  // inside t.a's 128 bytes
  check_error(b, "tensor 't.c' at data offset 96 overlaps tensor 't.a' at data [0, 128)", f.offset);
}

TEST_CASE("duplicate tensor names are rejected", "[gguf]") {
  auto b = small_file();
  size_t name_end = after_string(b, "t.c");
  TensorFields f = tensor_fields(b, "t.c");
  b[name_end - 1] = 'a';
  check_error(b, "duplicate tensor name 't.a'", f.offset);
}

TEST_CASE("n_dims of 0 and 5 are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.b");
  poke<uint32_t>(b, f.n_dims, 0);
  check_error(b, "tensor 't.b': n_dims 0 is outside 1..4", f.n_dims);
  poke<uint32_t>(b, f.n_dims, 5);
  check_error(b, "n_dims 5 is outside 1..4", f.n_dims);
}

TEST_CASE("zero and negative dimensions are rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.a");
  poke<uint64_t>(b, f.ne + 8, 0);
  check_error(b, "tensor 't.a': dimension 1 is 0", f.ne + 8);
  poke<uint64_t>(b, f.ne + 8, ~0ull);
  check_error(b, "dimension 1 is 18446744073709551615", f.ne + 8);
}

TEST_CASE("a dimension product that overflows 64 bits is rejected", "[gguf]") {
  auto b = small_file();
  TensorFields f = tensor_fields(b, "t.a");
  poke<uint64_t>(b, f.ne, 1ull << 32);
  poke<uint64_t>(b, f.ne + 8, 1ull << 32);
  check_error(b, "tensor 't.a': element count overflows 64 bits", f.ne + 8);
  // Elements fit in 63 bits but the byte size does not.
  poke<uint64_t>(b, f.ne, 1ull << 31);
  poke<uint64_t>(b, f.ne + 8, 1ull << 31);
  poke<uint32_t>(b, f.type, static_cast<uint32_t>(DType::Q8_0));
  check_error(b, "extends past end of file", f.offset);
  poke<uint64_t>(b, f.ne, 1ull << 62);
  poke<uint64_t>(b, f.ne + 8, 1);
  poke<uint32_t>(b, f.type, static_cast<uint32_t>(DType::F32));
  check_error(b, "tensor 't.a': byte size overflows 64 bits", f.type);
}

TEST_CASE("a file with no tensors and metadata only loads", "[gguf]") {
  Writer w;
  w.set_string("general.name", "empty");
  auto b = w.serialize();
  auto r = load(b);
  REQUIRE(r.ok());
  CHECK((*r)->tensors().empty());
  Writer none;
  auto r2 = load(none.serialize());
  CHECK(r2.ok());
}
