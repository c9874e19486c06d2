// Element types of tensors, numbered as GGUF/ggml numbers them (the ids are part of the
// GGUF file format), with their block geometry. Kernels live in backends/; this header
// only says how many bytes a row of n elements takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace hearth {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeInfo {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool supported;       // hearth can compute with it (dequantize / dot)
};

// Geometry of a GGUF type id, or nullopt for an id hearth does not know.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
const char* dtype_name(DType t);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

}  // namespace hearth
