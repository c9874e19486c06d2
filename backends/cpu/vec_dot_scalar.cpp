// Scalar dot products: the reference every SIMD kernel is tested against. Per block the
// integer part is summed exactly, then combined with the block scales in float, as in
// ggml's generic kernels.
#include <cstring>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot_kernels.h"
#include "common/fp16.h"

namespace hearth::cpu::detail {
namespace {

inline float h2f(uint16_t h) {
  return fp16_to_fp32(h);
}

// Blocks may sit at any address: copy each block into an aligned local before reading it.
template <class B>
inline B load_block(const uint8_t* p, int64_t i) {
  B b;
  std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(B)), sizeof(B));
  return b;
}

inline int q5_at(const uint8_t* qs, uint32_t qh, int j) {
  const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

float dot_f32(int64_t n, const uint8_t* w, const uint8_t* a) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    float wi, ai;
    std::memcpy(&wi, w + 4 * i, 4);
    std::memcpy(&ai, a + 4 * i, 4);
    sum += static_cast<double>(wi) * ai;
  }
  return static_cast<float>(sum);
}

template <bool kBf16>
float dot_half(int64_t n, const uint8_t* w, const uint8_t* a) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    float ai;
    std::memcpy(&h, w + 2 * i, 2);
    std::memcpy(&ai, a + 4 * i, 4);
    sum += static_cast<double>(kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h)) * ai;
  }
  return static_cast<float>(sum);
}

float dot_q4_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQk; ++i) {
    const auto x = load_block<BlockQ4_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += ((x.qs[j] & 0xF) - 8) * y.qs[j] + ((x.qs[j] >> 4) - 8) * y.qs[j + 16];
    sum += static_cast<float>(sumi) * (h2f(x.d) * h2f(y.d));
  }
  return sum;
}

float dot_q4_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQk; ++i) {
    const auto x = load_block<BlockQ4_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += (x.qs[j] & 0xF) * y.qs[j] + (x.qs[j] >> 4) * y.qs[j + 16];
    sum += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi) + h2f(x.m) * h2f(y.s);
  }
  return sum;
}

float dot_q5_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQk; ++i) {
    const auto x = load_block<BlockQ5_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQk; ++j) sumi += (q5_at(x.qs, qh, j) - 16) * y.qs[j];
    sum += static_cast<float>(sumi) * (h2f(x.d) * h2f(y.d));
  }
  return sum;
}

float dot_q5_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQk; ++i) {
    const auto x = load_block<BlockQ5_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQk; ++j) sumi += q5_at(x.qs, qh, j) * y.qs[j];
    sum += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi) + h2f(x.m) * h2f(y.s);
  }
  return sum;
}

float dot_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQk; ++i) {
    const auto x = load_block<BlockQ8_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int sumi = 0;
    for (int j = 0; j < kQk; ++j) sumi += x.qs[j] * y.qs[j];
    sum += static_cast<float>(sumi) * (h2f(x.d) * h2f(y.d));
  }
  return sum;
}

// Q4_K / Q5_K: sum_j sc_j * (q_j . a_j) * d - sum_j m_j * (sum of a_j) * dmin, the sums of
// a taken from the Q8_K bsums (two per sub-block of 32).
template <class B>
float dot_k_affine(int64_t n, const uint8_t* w, const uint8_t* a) {
  constexpr bool kHasHigh = sizeof(B) == sizeof(BlockQ5_K);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQkK; ++i) {
    const auto x = load_block<B>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int isum = 0, imin = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, x.scales, &sc, &m);
      const int g = j / 2, hi = j % 2;
      int dot = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = x.qs[32 * g + l];
        int q = hi ? (byte >> 4) : (byte & 0xF);
        if constexpr (kHasHigh) q |= ((x.qh[l] >> j) & 1) << 4;
        dot += q * y.qs[32 * j + l];
      }
      isum += sc * dot;
      imin += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    }
    sum += (h2f(x.d) * y.d) * static_cast<float>(isum) - (h2f(x.dmin) * y.d) * static_cast<float>(imin);
  }
  return sum;
}

float dot_q6_k(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQkK; ++i) {
    const auto x = load_block<BlockQ6_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int q[kQkK];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      int* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        qq[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
        qq[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        qq[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        qq[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      }
    }
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * j + l] * y.qs[16 * j + l];
      isum += x.scales[j] * dot;
    }
    sum += (h2f(x.d) * y.d) * static_cast<float>(isum);
  }
  return sum;
}

using DotFn = float (*)(int64_t, const uint8_t*, const uint8_t*);

template <DotFn kDot>
void gemm_pairs(const GemmArgs& g) {
  for (int64_t t = 0; t < g.n_tok; ++t)
    for (int64_t r = g.r0; r < g.r1; ++r)
      g.y[static_cast<size_t>(t) * g.ys + r] = kDot(g.n, g.w + r * g.ws, g.a + t * g.as);
}

template <DType kType>
void quantize_ref(const float* x, void* dst, int64_t n) {
  quantize_row(kType, x, dst, n);
}

KernelTable make_table() {
  KernelTable k;
  k.gemm[type_index(DType::F32)] = gemm_pairs<dot_f32>;
  k.gemm[type_index(DType::F16)] = gemm_pairs<dot_half<false>>;
  k.gemm[type_index(DType::BF16)] = gemm_pairs<dot_half<true>>;
  k.gemm[type_index(DType::Q4_0)] = gemm_pairs<dot_q4_0>;
  k.gemm[type_index(DType::Q4_1)] = gemm_pairs<dot_q4_1>;
  k.gemm[type_index(DType::Q5_0)] = gemm_pairs<dot_q5_0>;
  k.gemm[type_index(DType::Q5_1)] = gemm_pairs<dot_q5_1>;
  k.gemm[type_index(DType::Q8_0)] = gemm_pairs<dot_q8_0>;
  k.gemm[type_index(DType::Q4_K)] = gemm_pairs<dot_k_affine<BlockQ4_K>>;
  k.gemm[type_index(DType::Q5_K)] = gemm_pairs<dot_k_affine<BlockQ5_K>>;
  k.gemm[type_index(DType::Q6_K)] = gemm_pairs<dot_q6_k>;
  k.quantize[type_index(DType::F32)] = quantize_ref<DType::F32>;
  k.quantize[type_index(DType::Q8_0)] = quantize_ref<DType::Q8_0>;
  k.quantize[type_index(DType::Q8_1)] = quantize_ref<DType::Q8_1>;
  k.quantize[type_index(DType::Q8_K)] = quantize_ref<DType::Q8_K>;
  return k;
}

}  // namespace

const KernelTable& scalar_kernels() {
  static const KernelTable kTable = make_table();
  return kTable;
}

}  // namespace hearth::cpu::detail
