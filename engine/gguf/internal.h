// Helpers shared by the reader and writer; not part of the public API.
#pragma once

#include <cstdint>

#include "engine/gguf/gguf.h"

namespace hearth::gguf {

// Bytes of one scalar value of type t; 0 for STRING and ARRAY, whose size depends on content.
inline uint64_t value_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return 0;
  }
  return 0;
}

}  // namespace hearth::gguf
