#include "common/dtype.h"

#include <cassert>

namespace hearth {
namespace {

struct Entry {
  uint32_t id;
  DTypeInfo info;
};

// Block sizes and byte counts are those of the GGUF format (ggml's block_* structs):
// e.g. Q8_0 = fp16 scale + 32 int8 = 34 bytes for 32 elements.
constexpr Entry kTable[] = {
    {0, {"F32", 1, 4, true}},        {1, {"F16", 1, 2, true}},       {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},     {6, {"Q5_0", 32, 22, true}},    {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},     {9, {"Q8_1", 32, 36, true}},    {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}}, {12, {"Q4_K", 256, 144, true}}, {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},  {15, {"Q8_K", 256, 292, true}}, {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},      {26, {"I32", 1, 4, false}},     {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},      {30, {"BF16", 1, 2, true}},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const Entry& e : kTable)
    if (e.id == id) return e.info;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const Entry& e : kTable)
    if (e.id == static_cast<uint32_t>(t)) return e.info;
  assert(false && "unknown DType");
  return kTable[0].info;
}

const char* dtype_name(DType t) {
  return dtype_info(t).name;
}

}  // namespace hearth
