#include "backends/cpu/quant_ref.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "common/fp16.h"

namespace hearth::cpu {
namespace {

// Round half to even, as ggml's nearest_int (valid for |x| < 2^22).
inline int nearest_int(float x) {
  return static_cast<int>(std::nearbyint(x));
}

inline float h2f(uint16_t h) {
  return fp16_to_fp32(h);
}

// ---------------------------------------------------------------- dequantize

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

// The 5-bit quant of element j (0..31) of a Q5_0 / Q5_1 block.
inline int q5_of(const uint8_t* qs, const uint8_t* qh_bytes, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

void dequant_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQk; ++j) y[j] = (q5_of(b[i].qs, b[i].qh, j) - 16) * d;
  }
}

void dequant_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < kQk; ++j) y[j] = q5_of(b[i].qs, b[i].qh, j) * d + m;
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQk) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQk; ++j) y[j] = b[i].qs[j] * d;
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int g = 0; g < 4; ++g, q += 32) {
      uint8_t sc, m;
      unpack_scale_min_k4(2 * g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpack_scale_min_k4(2 * g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    const uint8_t* qh = b[i].qh;
    for (int g = 0; g < 4; ++g, q += 32) {
      uint8_t sc, m;
      unpack_scale_min_k4(2 * g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpack_scale_min_k4(2 * g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * g)), u2 = static_cast<uint8_t>(2u << (2 * g));
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void dequant_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQkK; ++j) *y++ = b[i].d * b[i].qs[j];
}

// ---------------------------------------------------------------- quantize

// Q4_0 / Q5_0: d = (value of largest magnitude) / -2^(bits-1), q = trunc(x/d + 2^(bits-1) + 0.5)
// clamped to the top code (ggml's formula, including its truncating cast).
template <int kBits>
void quant_sym(const float* x, uint16_t* d_out, uint8_t* qs, uint8_t* qh_out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQk; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  constexpr int kHalf = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  const float d = max / -kHalf;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  uint32_t qh = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    const int q0 = std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j] * id + (kHalf + 0.5f))));
    const int q1 = std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + (kHalf + 0.5f))));
    qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (qh_out) std::memcpy(qh_out, &qh, 4);
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min, q = trunc((x - min)/d + 0.5).
template <int kBits>
void quant_affine(const float* x, uint16_t* d_out, uint16_t* m_out, uint8_t* qs, uint8_t* qh_out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQk; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  constexpr int kTop = (1 << kBits) - 1;
  const float d = (max - min) / kTop;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  *m_out = fp32_to_fp16(min);
  uint32_t qh = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    int q0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    int q1 = static_cast<uint8_t>((x[j + 16] - min) * id + 0.5f);
    if (kBits == 4) {  // ggml clamps only the 4-bit variant
      q0 = std::min(kTop, q0);
      q1 = std::min(kTop, q1);
    }
    qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (qh_out) std::memcpy(qh_out, &qh, 4);
}

// Q8_0 / Q8_1: d = amax / 127, q = roundf(x / d) (half away from zero), as ggml's reference.
void quant_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQk; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quant_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQk; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// Q8_K: scale by -127 / (value of largest magnitude, first one on ties), round half to even,
// clamp at 127; d = 1 / that scale. (ggml leaves bsums stale for an all-zero block; we zero.)
void quant_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQkK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQkK; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQkK / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

// Q4_K / Q5_K (simple): each sub-block of 32 gets scale (max - min') / top and min -min' with
// min' = min(0, min x); the eight scales and eight mins are then quantized to 6 bits against
// their maxima, and the quants recomputed with the rounded scales.
template <int kBits>
void quant_k_affine(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* q_out) {
  constexpr int kTop = (1 << kBits) - 1;
  float sub_scale[8], sub_min[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float mn = 0.0f, mx = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      mn = std::min(mn, x[32 * j + l]);
      mx = std::max(mx, x[32 * j + l]);
    }
    sub_scale[j] = std::max(0.0f, (mx - mn) / kTop);
    sub_min[j] = -mn;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  uint8_t ls[8], lm[8];
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_scale * sub_scale[j]), 0, 63));
    lm[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_min * sub_min[j]), 0, 63));
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  pack_scale_min_k4(ls, lm, scales);
  const float d = h2f(*d_out), dmin = h2f(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, scales, &sc, &m);
    const float ds = d * sc, ms = dmin * m;
    for (int l = 0; l < 32; ++l) {
      const int q = ds != 0.0f ? nearest_int((x[32 * j + l] + ms) / ds) : 0;
      q_out[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, kTop));
    }
  }
}

void quant_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t q[kQkK];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    quant_k_affine<4>(x, &y[i].d, &y[i].dmin, y[i].scales, q);
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
  }
}

void quant_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t q[kQkK];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    quant_k_affine<5>(x, &y[i].d, &y[i].dmin, y[i].scales, q);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * g + l], hi = q[64 * g + 32 + l];
        y[i].qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
  }
}

// Q6_K (simple): sub-block scale = (value of largest magnitude) / -32, scales quantized to
// int8 against the largest one (d = max / -128), then q = round(x / (d * sc)) in [-32, 31].
void quant_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float sub[16], max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(x[16 * j + l]) > amax) {
          amax = std::fabs(x[16 * j + l]);
          max = x[16 * j + l];
        }
      }
      sub[j] = max / -32.0f;
      if (std::fabs(sub[j]) > amax_scale) {
        amax_scale = std::fabs(sub[j]);
        max_scale = sub[j];
      }
    }
    std::memset(&y[i], 0, sizeof(BlockQ6_K));
    if (amax_scale == 0.0f) continue;
    const float iscale = -128.0f / max_scale;
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * sub[j])));
    y[i].d = fp32_to_fp16(1 / iscale);
    const float d = h2f(y[i].d);
    uint8_t q[kQkK];
    for (int j = 0; j < 16; ++j) {
      const float ds = d * y[i].scales[j];
      for (int l = 0; l < 16; ++l) {
        const int v = ds != 0.0f ? nearest_int(x[16 * j + l] / ds) : 0;
        q[16 * j + l] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                     ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

// Rows may start at any address: run a per-block function on an aligned local copy.
template <class B, class F>
void dequant_blocks(const void* src, float* dst, int64_t nb, int64_t block_elems, F f) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    B b;
    std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(B)), sizeof(B));
    f(&b, dst + i * block_elems, 1);
  }
}

template <class B, class F>
void quant_blocks(const float* src, void* dst, int64_t nb, int64_t block_elems, F f) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < nb; ++i) {
    B b;
    f(src + i * block_elems, &b, 1);
    std::memcpy(p + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
  }
}

}  // namespace

bool can_dequantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
      return true;
    default:
      return false;
  }
}

bool can_quantize(DType t) {
  return can_dequantize(t);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  assert(n % dtype_info(t).block_elems == 0);
  const int64_t nb = n / dtype_info(t).block_elems;
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
    case DType::BF16: {
      const auto* p = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = t == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      break;
    }
    case DType::Q4_0:
      dequant_blocks<BlockQ4_0>(src, dst, nb, kQk, dequant_q4_0);
      break;
    case DType::Q4_1:
      dequant_blocks<BlockQ4_1>(src, dst, nb, kQk, dequant_q4_1);
      break;
    case DType::Q5_0:
      dequant_blocks<BlockQ5_0>(src, dst, nb, kQk, dequant_q5_0);
      break;
    case DType::Q5_1:
      dequant_blocks<BlockQ5_1>(src, dst, nb, kQk, dequant_q5_1);
      break;
    case DType::Q8_0:
      dequant_blocks<BlockQ8_0>(src, dst, nb, kQk, dequant_q8_0);
      break;
    case DType::Q8_1:  // q * d (s is redundant)
      dequant_blocks<BlockQ8_1>(src, dst, nb, kQk, [](const BlockQ8_1* b, float* y, int64_t) {
        for (int j = 0; j < kQk; ++j) y[j] = b->qs[j] * h2f(b->d);
      });
      break;
    case DType::Q4_K:
      dequant_blocks<BlockQ4_K>(src, dst, nb, kQkK, dequant_q4_k);
      break;
    case DType::Q5_K:
      dequant_blocks<BlockQ5_K>(src, dst, nb, kQkK, dequant_q5_k);
      break;
    case DType::Q6_K:
      dequant_blocks<BlockQ6_K>(src, dst, nb, kQkK, dequant_q6_k);
      break;
    case DType::Q8_K:
      dequant_blocks<BlockQ8_K>(src, dst, nb, kQkK, dequant_q8_k);
      break;
    default:
      assert(false && "dequantize_row: unsupported type");
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  assert(n % dtype_info(t).block_elems == 0);
  const int64_t nb = n / dtype_info(t).block_elems;
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
    case DType::BF16: {
      auto* p = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == DType::F16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    }
    case DType::Q4_0:
      quant_blocks<BlockQ4_0>(src, dst, nb, kQk,
                              [](const float* x, BlockQ4_0* y, int64_t) { quant_sym<4>(x, &y->d, y->qs, nullptr); });
      break;
    case DType::Q5_0:
      quant_blocks<BlockQ5_0>(src, dst, nb, kQk,
                              [](const float* x, BlockQ5_0* y, int64_t) { quant_sym<5>(x, &y->d, y->qs, y->qh); });
      break;
    case DType::Q4_1:
      quant_blocks<BlockQ4_1>(src, dst, nb, kQk, [](const float* x, BlockQ4_1* y, int64_t) {
        quant_affine<4>(x, &y->d, &y->m, y->qs, nullptr);
      });
      break;
    case DType::Q5_1:
      quant_blocks<BlockQ5_1>(src, dst, nb, kQk, [](const float* x, BlockQ5_1* y, int64_t) {
        quant_affine<5>(x, &y->d, &y->m, y->qs, y->qh);
      });
      break;
    case DType::Q8_0:
      quant_blocks<BlockQ8_0>(src, dst, nb, kQk, quant_q8_0);
      break;
    case DType::Q8_1:
      quant_blocks<BlockQ8_1>(src, dst, nb, kQk, quant_q8_1);
      break;
    case DType::Q8_K:
      quant_blocks<BlockQ8_K>(src, dst, nb, kQkK, quant_q8_k);
      break;
    case DType::Q4_K:
      quant_blocks<BlockQ4_K>(src, dst, nb, kQkK, quant_q4_k);
      break;
    case DType::Q5_K:
      quant_blocks<BlockQ5_K>(src, dst, nb, kQkK, quant_q5_k);
      break;
    case DType::Q6_K:
      quant_blocks<BlockQ6_K>(src, dst, nb, kQkK, quant_q6_k);
      break;
    default:
      assert(false && "quantize_row: unsupported type");
  }
}

}  // namespace hearth::cpu
