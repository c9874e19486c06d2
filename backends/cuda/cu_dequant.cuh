// Dequantization of one 32-element chunk of a weight row, as __host__ __device__ code: the
// CUDA kernels (cu_matmul.cu) run it on the device, and tests/backend/cuda_dequant_test.cu
// runs the very same functions on the host against cpu::dequantize_row, bit for bit.
//
// The layouts are those of backends/cpu/quant_ref.h (GGUF/ggml blocks). A row is cut into
// chunks of 32 elements; every block holds 32 elements (F32/F16/BF16 are treated as blocks
// of 32, the *_0/*_1 types) or 256 (the k-quants: 8 chunks, `sub` 0..7, per block). The
// formulas are quant_ref's, operation for operation, so the values are bitwise the CPU's.
// Every product that feeds a sum is rounded on its own (__fmul_rn / __fadd_rn on the
// device, where nvcc would otherwise fuse q * d + m into an fma; quant_ref is built with
// -ffp-contract=off). Today those products are all exact (a small integer times an fp16
// scale), so a fused form would round the same; the explicit forms keep it so if a formula
// changes.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "common/dtype.h"
#ifndef __CUDA_ARCH__
#include "common/fp16.h"
#endif

#define HEARTH_HD __host__ __device__ __forceinline__
// Unrolled on the device (constant register indices); the host compiler knows no such pragma.
#ifdef __CUDA_ARCH__
#define HEARTH_UNROLL _Pragma("unroll")
#else
#define HEARTH_UNROLL
#endif

namespace hearth::cuda {

constexpr int kChunk = 32;  // elements per chunk

struct BlockGeom {
  int elems;  // elements per block (F32/F16/BF16: one chunk)
  int bytes;  // bytes per block
};

// The block geometry the kernels use; equals dtype_info() for the quantized types (the test
// checks it).
constexpr BlockGeom block_geom(DType t) {
  // clang-format off
  switch (t) {
    case DType::F32: return {32, 128};
    case DType::F16: return {32, 64};
    case DType::BF16: return {32, 64};
    case DType::Q4_0: return {32, 18};
    case DType::Q4_1: return {32, 20};
    case DType::Q5_0: return {32, 22};
    case DType::Q5_1: return {32, 24};
    case DType::Q8_0: return {32, 34};
    case DType::Q4_K: return {256, 144};
    case DType::Q5_K: return {256, 176};
    case DType::Q6_K: return {256, 210};
    default: return {0, 0};
  }
  // clang-format on
}

// Calls f.template operator()<T>() for the runtime type; false when T is not supported.
template <class F>
bool dispatch_weight_type(DType type, F&& f) {
  // clang-format off
  switch (type) {
    case DType::F32: f.template operator()<DType::F32>(); return true;
    case DType::F16: f.template operator()<DType::F16>(); return true;
    case DType::BF16: f.template operator()<DType::BF16>(); return true;
    case DType::Q4_0: f.template operator()<DType::Q4_0>(); return true;
    case DType::Q4_1: f.template operator()<DType::Q4_1>(); return true;
    case DType::Q5_0: f.template operator()<DType::Q5_0>(); return true;
    case DType::Q5_1: f.template operator()<DType::Q5_1>(); return true;
    case DType::Q8_0: f.template operator()<DType::Q8_0>(); return true;
    case DType::Q4_K: f.template operator()<DType::Q4_K>(); return true;
    case DType::Q5_K: f.template operator()<DType::Q5_K>(); return true;
    case DType::Q6_K: f.template operator()<DType::Q6_K>(); return true;
    default: return false;
  }
  // clang-format on
}

constexpr bool is_plain(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

constexpr int chunks_per_block(DType t) {
  return block_geom(t).elems / kChunk;
}

// Byte offset, inside its row, of the block holding chunk c.
template <DType T>
HEARTH_HD int64_t chunk_block_offset(int64_t c) {
  return c / chunks_per_block(T) * block_geom(T).bytes;
}

// --- loads and arithmetic that are the same on both sides --------------------------------

// p must be 2-byte aligned on the device (every block field we read as a halfword is).
HEARTH_HD uint32_t ld_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
#endif
}

// Four bytes at a 2-byte aligned address, little-endian (two halfword loads: a 4-byte load
// would need 4-byte alignment, which blocks of 18, 22, 34 or 210 bytes do not give).
HEARTH_HD uint32_t ld_u32(const uint8_t* p) {
  return ld_u16(p) | (ld_u16(p + 2) << 16);
}

// Sixteen bytes; p must be 16-byte aligned on the device.
HEARTH_HD void ld_16(const uint8_t* p, uint32_t out[4]) {
#ifdef __CUDA_ARCH__
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  out[0] = q.x;
  out[1] = q.y;
  out[2] = q.z;
  out[3] = q.w;
#else
  std::memcpy(out, p, 16);
#endif
}

HEARTH_HD float f16_to_f32(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return fp16_to_fp32(static_cast<uint16_t>(h));
#endif
}

HEARTH_HD float bits_to_f32(uint32_t w) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(w);
#else
  return fp32_from_bits(w);
#endif
}

HEARTH_HD float bf16_to_f32(uint32_t h) {
  return bits_to_f32((h & 0xFFFFu) << 16);
}

// Separately rounded products and sums (never contracted into an fma).
HEARTH_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HEARTH_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HEARTH_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// Element e of a plain (F32/F16/BF16) row at p (2-byte aligned, as every row).
template <DType T>
HEARTH_HD float plain_element(const uint8_t* p, int64_t e) {
  if constexpr (T == DType::F32) {
    return bits_to_f32(ld_u32(p + 4 * e));
  } else if constexpr (T == DType::F16) {
    return f16_to_f32(ld_u16(p + 2 * e));
  } else {
    return bf16_to_f32(ld_u16(p + 2 * e));
  }
}

// --- the chunk ---------------------------------------------------------------------------

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block, scales at s
// (cpu::unpack_scale_min_k4).
HEARTH_HD void scale_min_k4(const uint8_t* s, int j, float* sc, float* m) {
  if (j < 4) {
    *sc = static_cast<float>(s[j] & 63);
    *m = static_cast<float>(s[j + 4] & 63);
  } else {
    *sc = static_cast<float>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<float>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// v[0..32) = elements 32 * sub .. 32 * sub + 31 of the block at p (elements n.. are 0; n < 32
// only in the last chunk of a plain row). p is 2-byte aligned; for the plain types it is the
// chunk's first element, 16-byte aligned on the device, and all 32 elements' bytes must be
// readable even when n < 32 (the kernels read from a shared-memory slot of that size).
template <DType T>
HEARTH_HD void dequant_chunk(const uint8_t* p, int sub, int n, float v[kChunk]) {
  if constexpr (T == DType::F32) {
    HEARTH_UNROLL
    for (int k = 0; k < 8; ++k) {
      uint32_t w[4];
      ld_16(p + 16 * k, w);
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) v[4 * k + e] = 4 * k + e < n ? bits_to_f32(w[e]) : 0.0f;
    }
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      uint32_t w[4];
      ld_16(p + 16 * k, w);
      HEARTH_UNROLL
      for (int e = 0; e < 8; ++e) {
        const uint32_t h = w[e / 2] >> (16 * (e % 2));
        const float f = T == DType::F16 ? f16_to_f32(h & 0xFFFFu) : bf16_to_f32(h);
        v[8 * k + e] = 8 * k + e < n ? f : 0.0f;
      }
    }
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
    // d, (m), qs[16]: qs[j] holds element j (low nibble) and j + 16 (high nibble).
    const float d = f16_to_f32(ld_u16(p));
    const float m = T == DType::Q4_1 ? f16_to_f32(ld_u16(p + 2)) : 0.0f;
    const uint8_t* qs = p + (T == DType::Q4_0 ? 2 : 4);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t q = ld_u32(qs + 4 * k);
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int lo = (q >> (8 * e)) & 0xF, hi = (q >> (8 * e + 4)) & 0xF;
        if constexpr (T == DType::Q4_0) {
          v[4 * k + e] = static_cast<float>(lo - 8) * d;
          v[4 * k + e + 16] = static_cast<float>(hi - 8) * d;
        } else {
          v[4 * k + e] = add_rn(mul_rn(static_cast<float>(lo), d), m);
          v[4 * k + e + 16] = add_rn(mul_rn(static_cast<float>(hi), d), m);
        }
      }
    }
  } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    // d, (m), qh[4], qs[16]: bit j of qh is bit 4 of element j.
    const float d = f16_to_f32(ld_u16(p));
    const float m = T == DType::Q5_1 ? f16_to_f32(ld_u16(p + 2)) : 0.0f;
    const uint32_t qh = ld_u32(p + (T == DType::Q5_0 ? 2 : 4));
    const uint8_t* qs = p + (T == DType::Q5_0 ? 6 : 8);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t q = ld_u32(qs + 4 * k);
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int j = 4 * k + e;
        const int lo = static_cast<int>(((q >> (8 * e)) & 0xF) | (((qh >> j) & 1) << 4));
        const int hi = static_cast<int>(((q >> (8 * e + 4)) & 0xF) | (((qh >> (j + 16)) & 1) << 4));
        if constexpr (T == DType::Q5_0) {
          v[j] = static_cast<float>(lo - 16) * d;
          v[j + 16] = static_cast<float>(hi - 16) * d;
        } else {
          v[j] = add_rn(mul_rn(static_cast<float>(lo), d), m);
          v[j + 16] = add_rn(mul_rn(static_cast<float>(hi), d), m);
        }
      }
    }
  } else if constexpr (T == DType::Q8_0) {
    const float d = f16_to_f32(ld_u16(p));
    HEARTH_UNROLL
    for (int k = 0; k < 8; ++k) {
      const uint32_t q = ld_u32(p + 2 + 4 * k);
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) v[4 * k + e] = static_cast<float>(static_cast<int8_t>(q >> (8 * e))) * d;
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // d, dmin, scales[12], (qh[32]), qs[128]. Sub-block `sub` is the low (even sub) or high
    // (odd sub) nibbles of qs[32 * (sub / 2) ..]; for Q5_K bit `sub` of qh[l] is bit 4 of its
    // element l. Value: (d * sc) * q - (dmin * m).
    const float d = f16_to_f32(ld_u16(p)), dmin = f16_to_f32(ld_u16(p + 2));
    float sc, mn;
    scale_min_k4(p + 4, sub, &sc, &mn);
    const float d1 = d * sc, m1 = dmin * mn;
    const uint8_t* qs = p + (T == DType::Q4_K ? 16 : 48) + 32 * (sub / 2);
    const int shift = 4 * (sub % 2);
    HEARTH_UNROLL
    for (int k = 0; k < 8; ++k) {
      const uint32_t q = ld_u32(qs + 4 * k);
      const uint32_t h = T == DType::Q5_K ? ld_u32(p + 16 + 4 * k) : 0u;
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) {
        int qv = static_cast<int>((q >> (8 * e + shift)) & 0xF);
        if constexpr (T == DType::Q5_K) qv += static_cast<int>((h >> (8 * e + sub)) & 1) << 4;
        v[4 * k + e] = sub_rn(mul_rn(d1, static_cast<float>(qv)), m1);
      }
    }
  } else if constexpr (T == DType::Q6_K) {
    // ql[128], qh[64], scales[16] (int8), d. Chunk sub = 4h + quarter covers elements
    // 128h + 32 quarter + l: the low (quarter 0, 1) or high (2, 3) nibbles of
    // ql[64h + 32 (quarter % 2) + l], bits 2 quarter, +1 of qh[32h + l] on top; scales
    // scales[8h + 2 quarter] for l < 16 and the next one for l >= 16. Value (d * sc) * (q - 32).
    const int h = sub / 4, quarter = sub % 4;
    const float d = f16_to_f32(ld_u16(p + 208));
    const uint8_t* ql = p + 64 * h + 32 * (quarter % 2);
    const uint8_t* qh = p + 128 + 32 * h;
    const int lshift = 4 * (quarter / 2), hshift = 2 * quarter;
    const float s0 = d * static_cast<float>(static_cast<int8_t>(p[192 + 8 * h + 2 * quarter]));
    const float s1 = d * static_cast<float>(static_cast<int8_t>(p[192 + 8 * h + 2 * quarter + 1]));
    HEARTH_UNROLL
    for (int k = 0; k < 8; ++k) {
      const uint32_t lo = ld_u32(ql + 4 * k), hi = ld_u32(qh + 4 * k);
      HEARTH_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int q = static_cast<int>(((lo >> (8 * e + lshift)) & 0xF) | (((hi >> (8 * e + hshift)) & 3) << 4));
        v[4 * k + e] = (k < 4 ? s0 : s1) * static_cast<float>(q - 32);
      }
    }
  } else {
    static_assert(T == DType::F32, "dequant_chunk: unsupported weight type");
  }
}

}  // namespace hearth::cuda
