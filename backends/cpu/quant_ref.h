// Quantized block layouts (byte for byte those of ggml / GGUF) and plain scalar reference
// conversions between them and f32. Everything here is portable C++ with no SIMD; the
// fast paths in vec_dot_*.cpp are tested against it.
//
// A row of n elements of a block type is n / block_elems blocks laid out back to back, with
// no padding and no alignment guarantee (blocks are 18, 22, 34, 144, 210 ... bytes long).
// All fp16 fields are IEEE half bit patterns.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace hearth::cpu {

constexpr int kQk = 32;    // elements per block of the *_0 / *_1 types
constexpr int kQkK = 256;  // elements per super-block of the k-quants

// In the *_0 / *_1 types, byte qs[j] holds element j in its low nibble and element j + 16 in
// its high nibble; for the 5-bit types bit j of the little-endian uint32 qh is bit 4 of
// element j. Element value: Q4_0 (q - 8) * d, Q5_0 (q - 16) * d, Q4_1 / Q5_1 q * d + m,
// Q8_0 q * d.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQk / 2];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQk / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQk];
};
// Activation type for Q4_1 / Q5_1: s = d * sum(qs) (d in f32 before rounding to fp16).
struct BlockQ8_1 {
  uint16_t d, s;
  int8_t qs[kQk];
};

// Q4_K: 8 sub-blocks of 32. scales[12] packs eight 6-bit scales sc[j] and mins m[j]
// (see unpack_scale_min_k4). Element 64*g + l (g = 0..3, l = 0..31) is the low nibble of
// qs[32*g + l] in sub-block 2g, element 64*g + 32 + l its high nibble in sub-block 2g + 1.
// Value: (d * sc[j]) * q - (dmin * m[j]).
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQkK / 2];
};
// Q5_K: as Q4_K plus a fifth bit: for element 64*g + l it is bit 2g of qh[l], for element
// 64*g + 32 + l bit 2g + 1 of qh[l].
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales. In half h (h = 0, 1; 128 elements), with
// ql' = ql + 64h, qh' = qh + 32h and l = 0..31, the 6-bit quants q (value (d*sc) * (q - 32)) are
//   element 128h +      l: low  nibble of ql'[l]      | bits 0-1 of qh'[l] << 4
//   element 128h + 32 + l: low  nibble of ql'[l + 32] | bits 2-3 of qh'[l] << 4
//   element 128h + 64 + l: high nibble of ql'[l]      | bits 4-5 of qh'[l] << 4
//   element 128h + 96 + l: high nibble of ql'[l + 32] | bits 6-7 of qh'[l] << 4
// and element e uses scales[e / 16].
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;
};
// Activation type for the k-quants: d in f32, bsums[j] = sum of qs[16j .. 16j + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j (0..7) scale and min of a Q4_K / Q5_K block: for j < 4 the low 6 bits of
// scales[j] and scales[j + 4]; for j >= 4 the nibbles of scales[j + 4] with their top two
// bits taken from the top bits of scales[j - 4] (scale) and scales[j] (min).
inline void unpack_scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The inverse: eight 6-bit scales and mins into the 12 scale bytes of a Q4_K / Q5_K block.
inline void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// Whether the reference functions below handle type t.
bool can_dequantize(DType t);
bool can_quantize(DType t);

// dst[0..n) = the values of the row src (n a multiple of the block size). F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K; same float formulas as ggml, so the
// results are bitwise ggml's.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Quantizes src[0..n) into row_bytes(t, n) bytes at dst. F32, F16, BF16, and the activation
// types Q8_0, Q8_1, Q8_K follow ggml's reference quantizers exactly (bitwise equal); Q4_0,
// Q4_1, Q5_0, Q5_1 use ggml's reference formulas too; Q4_K, Q5_K, Q6_K use a simple
// min/max search (ggml searches harder) — for tests and synthetic models.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace hearth::cpu
