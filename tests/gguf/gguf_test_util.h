// Small synthetic GGUF files for the gguf tests, and helpers to patch their bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"

namespace hearth::gguf::test {

inline std::vector<uint8_t> filled(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// A valid file with a few keys and three tensors whose data sizes are multiples of 32, so the
// file ends exactly where the last tensor's data ends (no trailing padding).
//   t.a: F32  [8, 4]   128 bytes
//   t.b: Q8_0 [64, 1]   68 bytes -> padded to 96 in the data section
//   t.c: F16  [16, 2]   64 bytes
inline Writer small_writer(uint32_t version = 3) {
  Writer w(version);
  w.set_string("general.architecture", "tiny");
  w.set_u32("tiny.block_count", 2);
  w.set_f32("tiny.eps", 1e-6f);
  w.set_i32_array("tiny.arr", {1, -2, 3});
  w.set_string_array("tokenizer.tokens", {"a", "bc", ""});
  w.set_bool("tiny.flag", true);
  w.add_tensor("t.a", DType::F32, {8, 4}, filled(128, 1));
  w.add_tensor("t.b", DType::Q8_0, {64, 1}, filled(68, 2));
  w.add_tensor("t.c", DType::F16, {16, 2}, filled(64, 3));
  return w;
}

inline std::vector<uint8_t> small_file(uint32_t version = 3) {
  return small_writer(version).serialize();
}

inline Result<std::unique_ptr<File>> load(const std::vector<uint8_t>& b) {
  return File::from_memory(b.data(), b.size());
}

// Byte offset just past the GGUF string (u64 length + bytes) equal to s; npos if absent.
inline size_t after_string(const std::vector<uint8_t>& b, const std::string& s) {
  std::vector<uint8_t> pat(8 + s.size());
  uint64_t n = s.size();
  std::memcpy(pat.data(), &n, 8);
  std::memcpy(pat.data() + 8, s.data(), s.size());
  for (size_t i = 0; i + pat.size() <= b.size(); ++i)
    if (std::memcmp(b.data() + i, pat.data(), pat.size()) == 0) return i + pat.size();
  return std::string::npos;
}

template <class T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

template <class T>
T peek(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// Field positions in the tensor info of tensor `name` (which must have n_dims dims).
struct TensorFields {
  size_t n_dims, ne, type, offset;
};
inline TensorFields tensor_fields(const std::vector<uint8_t>& b, const std::string& name) {
  size_t p = after_string(b, name);
  uint32_t n_dims = peek<uint32_t>(b, p);
  return {p, p + 4, p + 4 + 8 * n_dims, p + 4 + 8 * n_dims + 4};
}

// Calls every typed getter on every key (the results are ignored): exercises the getters
// on odd but accepted files. Shared by the mutation test and the libFuzzer target.
inline void read_every_value(const File& f) {
  for (const std::string& k : f.keys()) {
    (void)f.get_string(k);
    (void)f.get_uint(k);
    (void)f.get_int(k);
    (void)f.get_float(k);
    (void)f.get_bool(k);
    (void)f.get_string_array(k);
    (void)f.get_f32_array(k);
    (void)f.get_int_array(k);
    (void)f.array_length(k);
  }
}

}  // namespace hearth::gguf::test
