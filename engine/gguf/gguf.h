// Reader for GGUF files (versions 2 and 3), the llama.cpp model format:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv key/value pairs
//   | n_tensors tensor infos | padding to general.alignment | data section.
// Every offset, size, count, type and shape is checked against the file before use; a bad
// file yields an Error naming the problem and the byte offset of the offending field.
// A File is immutable after loading and safe to read from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/result.h"

namespace hearth::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

const char* value_type_name(ValueType t);

struct TensorInfo {
  std::string name;
  DType type;
  int n_dims;           // 1..4
  int64_t ne[4];        // ne[0] = innermost (row length, contiguous); unused dims = 1
  uint64_t offset;      // bytes, relative to the start of the data section
  uint64_t n_bytes;     // computed from type and shape
  const uint8_t* data;  // points into the file's bytes, validated in bounds

  int64_t n_elements() const;
  int64_t n_rows() const;  // n_elements / ne[0]
};

class File {
 public:
  // Maps the file read-only; the mapping lives as long as the File.
  static Result<std::unique_ptr<File>> open(const std::string& path);
  // Parses bytes the caller owns and keeps alive (and unchanged) while the File lives; no copy.
  static Result<std::unique_ptr<File>> from_memory(const void* data, size_t size);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // bytes from the file start
  const std::string& path() const { return path_; }      // "" for from_memory
  size_t size() const { return size_; }
  const uint8_t* base() const { return base_; }

  // Metadata. Keys are unique (a duplicate key is a load error).
  bool has(std::string_view key) const;
  std::optional<ValueType> type_of(std::string_view key) const;
  std::optional<ValueType> array_elem_type(std::string_view key) const;
  std::optional<uint64_t> array_length(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;  // view into the file
  Result<uint64_t> get_uint(std::string_view key) const;            // any integer type, must be >= 0
  Result<int64_t> get_int(std::string_view key) const;              // any integer type (U64 must fit)
  Result<double> get_float(std::string_view key) const;             // F32/F64 or any integer
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;    // F32/F64 arrays
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;  // integer or BOOL
  // Missing key -> def; present with the wrong type -> error.
  Result<uint64_t> get_uint_or(std::string_view key, uint64_t def) const;
  Result<double> get_float_or(std::string_view key, double def) const;
  Result<bool> get_bool_or(std::string_view key, bool def) const;
  std::vector<std::string> keys() const;  // in file order

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // A metadata value as found in the file: where its payload starts and what it holds.
  struct Value {
    std::string_view key;
    ValueType type;
    ValueType elem_type;  // arrays only
    uint64_t count;       // arrays only: number of elements
    uint64_t pos;         // byte offset of the payload (after the type field[s]/count)
    uint64_t key_pos;     // byte offset of the key, for messages
  };

 private:
  File() = default;
  friend class Parser;
  const Value* find(std::string_view key) const;
  Result<const Value*> need(std::string_view key) const;

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when we own an mmap of size_ bytes
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<Value> values_;            // file order
  std::vector<uint32_t> sorted_values_;  // indices into values_, sorted by key
  std::vector<TensorInfo> tensors_;
  std::vector<uint32_t> sorted_tensors_;  // indices into tensors_, sorted by name
};

}  // namespace hearth::gguf
