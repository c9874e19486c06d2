// Writes GGUF files (version 2 or 3; both use 64-bit counts and lengths). Used by tools and by
// tests to make small synthetic models. Metadata keeps insertion order; setting a key again
// replaces its value in place. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/result.h"
#include "engine/gguf/gguf.h"

namespace hearth::gguf {

class Writer {
 public:
  explicit Writer(uint32_t version = 3);  // 2 or 3

  // Power of two; also writes general.alignment (u32). Default 32 (GGUF's default).
  void set_alignment(uint64_t a);

  void set_u8(std::string key, uint8_t v);
  void set_i8(std::string key, int8_t v);
  void set_u16(std::string key, uint16_t v);
  void set_i16(std::string key, int16_t v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i64(std::string key, int64_t v);
  void set_f32(std::string key, float v);
  void set_f64(std::string key, double v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string_view v);

  void set_string_array(std::string key, const std::vector<std::string>& v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);
  void set_u32_array(std::string key, const std::vector<uint32_t>& v);
  // Any array: `payload` is the elements exactly as they appear in the file, little-endian
  // (for STRING: u64 length + bytes each; for ARRAY: elem type u32 + u64 count + payload each).
  void set_array(std::string key, ValueType elem, std::vector<uint8_t> payload, uint64_t count);
  // Any value with a raw payload (after the type field); for tests that need odd encodings.
  void set_raw(std::string key, ValueType type, std::vector<uint8_t> payload);

  // ne[0] is the row length; data.size() must equal row_bytes(type, ne[0]) * rows (asserted).
  void add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data);

  std::vector<uint8_t> serialize() const;
  // Writes path.tmp, fsyncs it, renames it over path.
  Status write_file(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    ValueType type;
    std::vector<uint8_t> payload;
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  void set(std::string key, ValueType type, std::vector<uint8_t> payload);

  uint32_t version_;
  uint64_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace hearth::gguf
