// Scalar references: block layouts decode as ggml's, quantizers round-trip within bounds.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "backends/cpu/quant_ref.h"
#include "common/fp16.h"
#include "quant_test_util.h"

using hearth::DType;
using hearth::dtype_info;
using hearth::row_bytes;
using namespace hearth::cpu;
using namespace hearth::test;

namespace {

const DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                             DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

uint32_t bits(float f) {
  return hearth::fp32_to_bits(f);
}

std::vector<float> dequant(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, src, out.data(), n);
  return out;
}

}  // namespace

TEST_CASE("dequantize_row matches a per-element decoding of the ggml layout bit for bit", "[quant]") {
  std::mt19937 rng(1234);
  for (DType t : kBlockTypes) {
    CAPTURE(dtype_info(t).name);
    const int64_t be = dtype_info(t).block_elems;
    for (int64_t nb : {1, 3, 7}) {
      const auto row = random_blocks(t, nb, rng);
      const auto out = dequant(t, row.data(), nb * be);
      for (int64_t i = 0; i < nb; ++i) {
        for (int e = 0; e < be; ++e) {
          const Elem el = decode_elem(t, row.data() + i * dtype_info(t).block_bytes, e);
          CAPTURE(i, e);
          REQUIRE(bits(out[static_cast<size_t>(i * be + e)]) == bits(el.value()));
        }
      }
    }
  }
}

TEST_CASE("dequantize_row of plain types converts each element exactly", "[quant]") {
  std::mt19937 rng(7);
  const auto x = random_floats(100, rng);
  std::vector<uint16_t> h(100), bf(100);
  for (int i = 0; i < 100; ++i) {
    h[i] = hearth::fp32_to_fp16(x[i]);
    bf[i] = hearth::fp32_to_bf16(x[i]);
  }
  const auto f16 = dequant(DType::F16, h.data(), 100);
  const auto b16 = dequant(DType::BF16, bf.data(), 100);
  const auto f32 = dequant(DType::F32, x.data(), 100);
  for (int i = 0; i < 100; ++i) {
    REQUIRE(f16[i] == hearth::fp16_to_fp32(h[i]));
    REQUIRE(b16[i] == hearth::bf16_to_fp32(bf[i]));
    REQUIRE(bits(f32[i]) == bits(x[i]));
  }
}

TEST_CASE("Q4_0 packs element j in the low nibble and element j+16 in the high nibble", "[quant]") {
  float x[32] = {};
  x[0] = -8.0f;  // largest magnitude, negative -> d = 1, q = x + 8
  x[16] = 7.0f;
  x[1] = 3.0f;
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  CHECK(hearth::fp16_to_fp32(b.d) == 1.0f);
  CHECK(b.qs[0] == (0 | (15 << 4)));
  CHECK(b.qs[1] == (11 | (8 << 4)));
}

TEST_CASE("Q8_0 follows ggml: d = amax/127, q = roundf(x/d) (half away from zero)", "[quant]") {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.0f;  // amax 16
  x[31] = 2.5f;                                                       // 2.5 * 127/16 = 19.84375
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  CHECK(hearth::fp16_to_fp32(b.d) == hearth::fp16_to_fp32(hearth::fp32_to_fp16(16.0f / 127)));
  CHECK(b.qs[0] == -127);
  CHECK(b.qs[17] == 8);   // 1 * 7.9375
  CHECK(b.qs[31] == 20);  // 19.84375
  // A tie: amax 127 gives id = 1, and 2.5 rounds away from zero to 3 (not to even 2).
  float y[32] = {};
  y[0] = 127.0f;
  y[1] = 2.5f;
  y[2] = -2.5f;
  quantize_row(DType::Q8_0, y, &b, 32);
  CHECK(b.qs[1] == 3);
  CHECK(b.qs[2] == -3);
}

TEST_CASE("Q8_K follows ggml: scale -127/max, round half to even, bsums of 16", "[quant]") {
  std::vector<float> x(256, 0.0f);
  x[5] = 127.0f;   // the first value of largest magnitude -> iscale = -127/127 = -1
  x[6] = 2.5f;     // -2.5 -> -2 (ties to even)
  x[7] = -127.0f;  // same magnitude, later: does not change the scale
  BlockQ8_K b;
  quantize_row(DType::Q8_K, x.data(), &b, 256);
  CHECK(b.d == -1.0f);
  CHECK(b.qs[5] == -127);
  CHECK(b.qs[6] == -2);
  CHECK(b.qs[7] == 127);
  CHECK(b.bsums[0] == -127 - 2 + 127);
  for (int g = 1; g < 16; ++g) CHECK(b.bsums[g] == 0);
  // All-zero block: d = 0, quants 0, bsums 0.
  std::fill(x.begin(), x.end(), 0.0f);
  quantize_row(DType::Q8_K, x.data(), &b, 256);
  CHECK(b.d == 0.0f);
  CHECK(std::all_of(b.qs, b.qs + 256, [](int8_t q) { return q == 0; }));
}

TEST_CASE("Q8_1 stores s = d * sum(q) alongside the Q8_0-style quants", "[quant]") {
  std::mt19937 rng(3);
  const auto x = random_floats(64, rng);
  BlockQ8_1 b[2];
  BlockQ8_0 ref[2];
  quantize_row(DType::Q8_1, x.data(), b, 64);
  quantize_row(DType::Q8_0, x.data(), ref, 64);
  for (int i = 0; i < 2; ++i) {
    CHECK(b[i].d == ref[i].d);
    CHECK(std::memcmp(b[i].qs, ref[i].qs, 32) == 0);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b[i].qs[j];
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * i + j]));
    CHECK(b[i].s == hearth::fp32_to_fp16(static_cast<float>(sum) * (amax / 127)));
  }
}

TEST_CASE("quantize then dequantize stays within each type's error bound", "[quant]") {
  std::mt19937 rng(99);
  const int64_t n = 256 * 8;
  auto x = random_floats(n, rng);
  x[3] = 0.0f;
  for (int i = 512; i < 544; ++i) x[i] = 0.0f;                // an all-zero block
  for (int i = 768; i < 1024; ++i) x[i] = 1.0f + 0.001f * i;  // a block with a large offset

  SECTION("plain types") {
    std::vector<uint16_t> h(n);
    quantize_row(DType::F16, x.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(h[i] == hearth::fp32_to_fp16(x[i]));
    quantize_row(DType::BF16, x.data(), h.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(h[i] == hearth::fp32_to_bf16(x[i]));
  }

  // *_0 / *_1 / Q8_K: per-block max error in units of the block's step size
  // (d = amax/127 for the 8-bit types, amax/8 and amax/16 for Q4_0 / Q5_0, whose top code
  // clamps so the error reaches one step; range/15 and range/31 for Q4_1 / Q5_1), plus the
  // fp16 rounding of d and m (relative 2^-11, times the largest code).
  struct Bound {
    DType t;
    double steps;       // allowed error in steps
    double step_denom;  // step = block amax (or range) / step_denom
    bool affine;
  };
  const Bound bounds[] = {{DType::Q8_0, 0.5, 127, false}, {DType::Q8_K, 0.5, 127, false}, {DType::Q4_0, 1.0, 8, false},
                          {DType::Q5_0, 1.0, 16, false},  {DType::Q4_1, 0.5, 15, true},   {DType::Q5_1, 0.5, 31, true}};
  for (const Bound& b : bounds) {
    SECTION(dtype_info(b.t).name) {
      std::vector<uint8_t> q(row_bytes(b.t, n));
      quantize_row(b.t, x.data(), q.data(), n);
      const auto y = dequant(b.t, q.data(), n);
      const int64_t be = dtype_info(b.t).block_elems;
      for (int64_t i = 0; i < n / be; ++i) {
        double amax = 0, mn = 1e30, mx = -1e30;
        for (int64_t j = i * be; j < (i + 1) * be; ++j) {
          amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
          mn = std::min(mn, static_cast<double>(x[j]));
          mx = std::max(mx, static_cast<double>(x[j]));
        }
        const double step = (b.affine ? mx - mn : amax) / b.step_denom;
        const double tol = b.steps * step + 2 * b.step_denom * step * std::ldexp(1.0, -11) +
                           std::fabs(mn) * std::ldexp(1.0, -10) * b.affine + 1e-7;
        for (int64_t j = i * be; j < (i + 1) * be; ++j) {
          CAPTURE(i, j, x[j], y[j]);
          REQUIRE(std::fabs(static_cast<double>(y[j]) - x[j]) <= tol);
        }
      }
    }
  }

  // k-quants (simple quantizers): relative RMS error over the row. A uniform quantizer with
  // 2^b levels over ~5 sigma gives RMS ~ 5/2^b/sqrt(12) sigma, about 0.09 for 4 bits; the
  // 6-bit scales and the zero-forced minimum add a little.
  const std::pair<DType, double> k_bounds[] = {{DType::Q4_K, 0.12}, {DType::Q5_K, 0.06}, {DType::Q6_K, 0.03}};
  for (const auto& [t, rel] : k_bounds) {
    SECTION(dtype_info(t).name) {
      std::vector<uint8_t> q(row_bytes(t, n));
      quantize_row(t, x.data(), q.data(), n);
      const auto y = dequant(t, q.data(), n);
      double err = 0, ref = 0;
      for (int64_t j = 0; j < n; ++j) {
        err += (static_cast<double>(y[j]) - x[j]) * (static_cast<double>(y[j]) - x[j]);
        ref += static_cast<double>(x[j]) * x[j];
      }
      CHECK(std::sqrt(err / ref) < rel);
      for (int j = 512; j < 544; ++j) CHECK(std::fabs(y[j]) < 1e-3);
    }
  }
}
