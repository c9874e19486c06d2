// Test helpers for the quant kernels: random blocks, and an element decoder written from the
// block layouts directly (byte offsets, not hearth's structs) as an independent check.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/vec_dot.h"
#include "common/dtype.h"
#include "common/fp16.h"

namespace hearth::test {

// Every SIMD level this CPU runs, scalar first.
inline std::vector<cpu::SimdLevel> supported_levels() {
  std::vector<cpu::SimdLevel> v;
  for (cpu::SimdLevel l : {cpu::SimdLevel::Scalar, cpu::SimdLevel::AVX2, cpu::SimdLevel::AVX512, cpu::SimdLevel::AMX})
    if (l <= cpu::detect_simd_level()) v.push_back(l);
  return v;
}

// Element e of a block as scale * q + offset (offset only when has_offset); value() is the
// float formula ggml uses (same operation order), so it must match dequantize bit for bit.
struct Elem {
  float scale;
  int q;
  float offset;
  bool has_offset;
  float value() const { return has_offset ? scale * static_cast<float>(q) + offset : scale * static_cast<float>(q); }
  // Magnitude of the terms, for error bounds: |scale * q| + |offset|.
  double magnitude() const {
    return std::fabs(static_cast<double>(scale) * q) + std::fabs(static_cast<double>(offset));
  }
};

inline float read_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

inline void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] % 64;
    *m = s[j + 4] % 64;
  } else {
    *sc = (s[j + 4] % 16) + 16 * (s[j - 4] / 64);
    *m = (s[j + 4] / 16) + 16 * (s[j] / 64);
  }
}

// Decodes element e (0 .. block_elems-1) of one block of type t starting at b.
inline Elem decode_elem(DType t, const uint8_t* b, int e) {
  auto nib = [](const uint8_t* qs, int e) { return e < 16 ? qs[e] % 16 : qs[e - 16] / 16; };
  auto bit5 = [](const uint8_t* qh, int e) { return ((qh[e / 8] >> (e % 8)) & 1) * 16; };
  switch (t) {
    case DType::Q4_0:
      return {read_f16(b), nib(b + 2, e) - 8, 0.0f, false};
    case DType::Q4_1:
      return {read_f16(b), nib(b + 4, e), read_f16(b + 2), true};
    case DType::Q5_0:
      return {read_f16(b), (nib(b + 6, e) + bit5(b + 2, e)) - 16, 0.0f, false};
    case DType::Q5_1:
      return {read_f16(b), nib(b + 8, e) + bit5(b + 4, e), read_f16(b + 2), true};
    case DType::Q8_0:
      return {read_f16(b), static_cast<int8_t>(b[2 + e]), 0.0f, false};
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = t == DType::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      const int j = e / 32, l = e % 32;
      const uint8_t byte = qs[32 * (j / 2) + l];
      int q = j % 2 ? byte / 16 : byte % 16;
      if (five) q += ((b[16 + l] >> j) & 1) * 16;
      int sc, m;
      k4_scale_min(b + 4, j, &sc, &m);
      return {read_f16(b) * sc, q, -(read_f16(b + 2) * m), true};
    }
    case DType::Q6_K: {
      const int h = e / 128, c = (e % 128) / 32, l = e % 32;
      const uint8_t lo = b[64 * h + l + 32 * (c % 2)];
      const int nibble = c < 2 ? lo % 16 : lo / 16;
      const int hi = (b[128 + 32 * h + l] >> (2 * c)) & 3;
      const auto sc = static_cast<int8_t>(b[192 + e / 16]);
      return {read_f16(b + 208) * sc, nibble + 16 * hi - 32, 0.0f, false};
    }
    case DType::Q8_K: {
      float d;
      std::memcpy(&d, b, 4);
      return {d, static_cast<int8_t>(b[4 + e]), 0.0f, false};
    }
    default:
      return {0, 0, 0, false};
  }
}

// Random row of nb blocks of type t: random bytes, with every scale field set to a finite
// value of sane magnitude (fp16 in +-[2^-10, 1], Q8_K's f32 d in +-[2^-10, 1]).
inline std::vector<uint8_t> random_blocks(DType t, int64_t nb, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(t);
  std::vector<uint8_t> v(static_cast<size_t>(nb) * info.block_bytes);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(std::ldexp(1.0f, -10), 1.0f);
  auto scale = [&] {
    const float s = mag(rng);
    return rng() % 2 ? s : -s;
  };
  auto put16 = [](uint8_t* p, float f) {
    const uint16_t h = fp32_to_fp16(f);
    std::memcpy(p, &h, 2);
  };
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* b = v.data() + i * info.block_bytes;
    switch (t) {
      case DType::Q4_0:
      case DType::Q5_0:
      case DType::Q8_0:
        put16(b, scale());
        break;
      case DType::Q4_1:
      case DType::Q5_1:
        put16(b, scale());
        put16(b + 2, scale());
        break;
      case DType::Q4_K:
      case DType::Q5_K:  // d, dmin >= 0 as ggml writes them
        put16(b, std::fabs(scale()) / 64);
        put16(b + 2, std::fabs(scale()) / 64);
        break;
      case DType::Q6_K:
        put16(b + 208, scale() / 64);
        break;
      case DType::Q8_K: {
        const float d = scale();
        std::memcpy(b, &d, 4);
        for (int j = 0; j < 256; ++j)
          if (b[4 + j] == 0x80) b[4 + j] = 0x81;  // quantizers never emit -128
        for (int g = 0; g < 16; ++g) {            // consistent bsums
          int s = 0;
          for (int l = 0; l < 16; ++l) s += static_cast<int8_t>(b[4 + 16 * g + l]);
          const auto s16 = static_cast<int16_t>(s);
          std::memcpy(b + 260 + 2 * g, &s16, 2);
        }
        break;
      }
      case DType::F16:
      case DType::BF16: {  // finite values in +-[2^-10, 1]
        for (int64_t j = 0; j < nb; ++j) {
          const uint16_t h = t == DType::F16 ? fp32_to_fp16(scale()) : fp32_to_bf16(scale());
          std::memcpy(v.data() + 2 * j, &h, 2);
        }
        return v;
      }
      case DType::F32: {
        for (int64_t j = 0; j < nb; ++j) {
          const float f = scale();
          std::memcpy(v.data() + 4 * j, &f, 4);
        }
        return v;
      }
      default:
        break;
    }
  }
  return v;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Copies bytes to a buffer at the given byte offset from a 64-byte boundary; returns the
// pointer to the copy (kept alive by storage).
inline const uint8_t* misaligned_copy(const std::vector<uint8_t>& src, int offset, std::vector<uint8_t>& storage) {
  storage.assign(src.size() + 128, 0);
  auto base = reinterpret_cast<uintptr_t>(storage.data());
  uint8_t* p = storage.data() + ((64 - base % 64) % 64) + offset;
  std::memcpy(p, src.data(), src.size());
  return p;
}

}  // namespace hearth::test
