// Bulk f32 <-> f16 conversion (KV cache stores and loads), with F16C where the active
// SIMD level has it. Results are exact IEEE conversions (round to nearest even), equal
// to common/fp16.h's scalar ones, at every level.
#pragma once

#include <cstdint>

namespace hearth::cpu {

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);

}  // namespace hearth::cpu
