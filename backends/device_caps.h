// What a backend can run, asked in one place (Backend::caps) instead of one query per
// question, and the weight types hearth's kernels exist for: the one table every backend
// starts from (a device that lacks a kernel clears its bit).
#pragma once

#include <bitset>
#include <cstddef>
#include <initializer_list>

#include "common/dtype.h"

namespace hearth {

// Every type a MatMul or GetRows weight can have on some backend.
inline constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                         DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct DeviceCaps {
  std::bitset<32> weight_types;  // indexed by the GGUF type id
  std::bitset<32> kv_types;      // types the KV cache may have (StoreKv, Attention)

  bool supports_weight(DType t) const { return bit(weight_types, t); }
  bool supports_kv(DType t) const { return bit(kv_types, t); }

  // Every weight type of kWeightTypes and F16, F32 or Q8_0 KV: what the CPU backend runs.
  static DeviceCaps all() {
    DeviceCaps c;
    for (DType t : kWeightTypes) c.weight_types.set(static_cast<size_t>(t));
    for (DType t : {DType::F16, DType::F32, DType::Q8_0}) c.kv_types.set(static_cast<size_t>(t));
    return c;
  }

 private:
  static bool bit(const std::bitset<32>& b, DType t) {
    const auto i = static_cast<size_t>(t);
    return i < b.size() && b.test(i);
  }
};

}  // namespace hearth
