// vec_dot / gemm / quantize_activations at every SIMD level this CPU supports, against
// double-precision dot products of the dequantized rows and against each other.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"
#include "quant_test_util.h"

using hearth::DType;
using hearth::dtype_info;
using hearth::row_bytes;
using namespace hearth::cpu;
using namespace hearth::test;

namespace {

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                              DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool is_plain(DType t) {
  return dtype_info(t).block_elems == 1;
}

// Activation row for weight type w: n random floats quantized (scalar reference) to
// vec_dot_type(w).
std::vector<uint8_t> make_acts(DType w, int64_t n, std::mt19937& rng) {
  const DType at = vec_dot_type(w);
  const auto x = random_floats(n, rng);
  std::vector<uint8_t> a(row_bytes(at, n));
  quantize_row(at, x.data(), a.data(), n);
  return a;
}

struct Reference {
  double dot;  // dequantized w . dequantized a, in double
  double tol;  // allowed |vec_dot - dot|
};

// Tolerance: every block's integer dot is exact; it is then scaled by a product of at most
// three floats and summed in float with at most ~(blocks + 16 lanes) additions, so for the
// <= 12 blocks used here the relative error is below ~30 * 2^-24 = 2e-6 of
// S = sum |w_i| |a_i| (with |w_i| = |scale*q| + |offset| to cover the k-quants' cancelling
// minimums). We allow 1e-5 * S. The *_1 types also use the activation's stored
// s = fp16(d * sum q), which differs from fp16(d) * sum q by up to 2^-10 relative: allowed
// explicitly per block.
Reference reference(DType w, int64_t n, const uint8_t* wrow, const uint8_t* arow) {
  const DType at = vec_dot_type(w);
  std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
  dequantize_row(w, wrow, wf.data(), n);
  dequantize_row(at, arow, af.data(), n);
  double dot = 0, s = 0, extra = 0;
  const int64_t be = dtype_info(w).block_elems;
  for (int64_t i = 0; i < n; ++i) {
    dot += static_cast<double>(wf[i]) * af[i];
    const double mag =
        is_plain(w) ? std::fabs(wf[i])
                    : decode_elem(w, wrow + (i / be) * dtype_info(w).block_bytes, static_cast<int>(i % be)).magnitude();
    s += mag * std::fabs(af[i]);
  }
  if (w == DType::Q4_1 || w == DType::Q5_1) {
    for (int64_t b = 0; b < n / 32; ++b) {
      const double m = decode_elem(w, wrow + b * dtype_info(w).block_bytes, 0).offset;
      const double sum = std::fabs(read_f16(arow + b * 36 + 2));
      extra += std::fabs(m) * sum * std::ldexp(1.0, -9);
    }
  }
  return {dot, 1e-5 * s + extra + 1e-30};
}

std::vector<int64_t> test_sizes(DType w) {
  if (is_plain(w)) return {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 640};
  std::vector<int64_t> v;
  for (int64_t nb = 1; nb <= 12; ++nb) v.push_back(nb * dtype_info(w).block_elems);
  return v;
}

}  // namespace

TEST_CASE("vec_dot matches the double-precision dot of dequantized rows at every level", "[vec_dot]") {
  std::mt19937 rng(42);
  for (DType w : kWeightTypes) {
    CAPTURE(dtype_info(w).name);
    for (int64_t n : test_sizes(w)) {
      CAPTURE(n);
      const int64_t wn = is_plain(w) ? n : n / dtype_info(w).block_elems;
      const auto wrow = random_blocks(w, wn, rng);
      const auto arow = make_acts(w, n, rng);
      const Reference ref = reference(w, n, wrow.data(), arow.data());
      const float scalar = vec_dot_at(SimdLevel::Scalar, w, n, wrow.data(), arow.data());
      for (SimdLevel level : supported_levels()) {
        CAPTURE(simd_level_name(level));
        for (int offset = 0; offset <= 3; ++offset) {
          CAPTURE(offset);
          std::vector<uint8_t> ws, as;
          const uint8_t* wp = misaligned_copy(wrow, offset, ws);
          const uint8_t* ap = misaligned_copy(arow, (offset * 3 + 1) % 4, as);
          const float got = vec_dot_at(level, w, n, wp, ap);
          CAPTURE(got, ref.dot, ref.tol, scalar);
          REQUIRE(std::fabs(got - ref.dot) <= ref.tol);
          REQUIRE(std::fabs(got - scalar) <= 2 * ref.tol);  // SIMD close to scalar
        }
      }
    }
  }
}

TEST_CASE("gemm gives each (row, token) exactly vec_dot's float, whatever the batch", "[vec_dot]") {
  std::mt19937 rng(5);
  constexpr int64_t kRows = 13;
  constexpr size_t kYStride = 17;
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  for (DType w : kWeightTypes) {
    CAPTURE(dtype_info(w).name);
    const DType at = vec_dot_type(w);
    for (int64_t n : {is_plain(w) ? int64_t{37} : dtype_info(w).block_elems * 3,
                      is_plain(w) ? int64_t{64} : dtype_info(w).block_elems * 5}) {
      CAPTURE(n);
      // Row strides of a few bytes more than a row: rows start misaligned.
      const size_t w_row = row_bytes(w, n), a_row = row_bytes(at, n);
      const size_t ws = w_row + 3, as = a_row + 5;
      std::vector<uint8_t> W(ws * kRows + 1), A(as * 9 + 1);
      for (int64_t r = 0; r < kRows; ++r) {
        const auto row = random_blocks(w, is_plain(w) ? n : n / dtype_info(w).block_elems, rng);
        std::memcpy(W.data() + 1 + r * ws, row.data(), w_row);
      }
      for (int64_t t = 0; t < 9; ++t) {
        const auto row = make_acts(w, n, rng);
        std::memcpy(A.data() + 1 + t * as, row.data(), a_row);
      }
      const uint8_t* w0 = W.data() + 1;
      const uint8_t* a0 = A.data() + 1;
      for (SimdLevel level : supported_levels()) {
        CAPTURE(simd_level_name(level));
        for (int64_t n_tok = 1; n_tok <= 9; ++n_tok) {
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, kRows}, {3, 10}, {5, 6}, {1, 12}}) {
            CAPTURE(n_tok, r0, r1);
            std::vector<float> Y(kYStride * 9, sentinel);
            gemm_at(level, w, n, w0, ws, r0, r1, a0, as, n_tok, Y.data(), kYStride);
            for (int64_t t = 0; t < 9; ++t) {
              for (size_t r = 0; r < kYStride; ++r) {
                const float y = Y[t * kYStride + r];
                if (t < n_tok && static_cast<int64_t>(r) >= r0 && static_cast<int64_t>(r) < r1) {
                  const float want = vec_dot_at(level, w, n, w0 + r * ws, a0 + t * as);
                  REQUIRE(hearth::fp32_to_bits(y) == hearth::fp32_to_bits(want));
                } else {
                  REQUIRE(std::isnan(y));  // untouched
                }
              }
            }
          }
        }
      }
    }
  }
}

// Prefill batches take other paths than decode (weights unpacked once per group of rows and
// chunk of tokens, interleaved layouts): every output must still be vec_dot's float, at any
// row range (groups cut short at the end) and token count (chunks and tiles cut short).
TEST_CASE("gemm over prefill-sized batches gives each (row, token) exactly vec_dot's float", "[vec_dot]") {
  std::mt19937 rng(21);
  constexpr int64_t kRows = 37, kTok = 139;
  for (DType w : kWeightTypes) {
    CAPTURE(dtype_info(w).name);
    const DType at = vec_dot_type(w);
    const int64_t n = is_plain(w) ? 72 : dtype_info(w).block_elems * (dtype_info(w).block_elems == 32 ? 7 : 2);
    const size_t ws = row_bytes(w, n), as = row_bytes(at, n);
    std::vector<uint8_t> W, A;
    for (int64_t r = 0; r < kRows; ++r) {
      const auto row = random_blocks(w, is_plain(w) ? n : n / dtype_info(w).block_elems, rng);
      W.insert(W.end(), row.begin(), row.end());
    }
    for (int64_t t = 0; t < kTok; ++t) {
      const auto row = make_acts(w, n, rng);
      A.insert(A.end(), row.begin(), row.end());
    }
    for (SimdLevel level : supported_levels()) {
      CAPTURE(simd_level_name(level));
      std::vector<float> want(static_cast<size_t>(kRows * kTok));
      for (int64_t t = 0; t < kTok; ++t)
        for (int64_t r = 0; r < kRows; ++r)
          want[t * kRows + r] = vec_dot_at(level, w, n, W.data() + r * ws, A.data() + t * as);
      for (int64_t n_tok : {17, 64, 73, 139}) {
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, kRows}, {16, 32}, {5, 30}, {33, 37}}) {
          CAPTURE(n_tok, r0, r1);
          std::vector<float> Y(static_cast<size_t>(kRows * kTok), std::numeric_limits<float>::quiet_NaN());
          gemm_at(level, w, n, W.data(), ws, r0, r1, A.data(), as, n_tok, Y.data(), kRows);
          for (int64_t t = 0; t < kTok; ++t) {
            for (int64_t r = 0; r < kRows; ++r) {
              const float y = Y[t * kRows + r];
              if (t < n_tok && r >= r0 && r < r1) {
                REQUIRE(hearth::fp32_to_bits(y) == hearth::fp32_to_bits(want[t * kRows + r]));
              } else {
                REQUIRE(std::isnan(y));
              }
            }
          }
        }
      }
    }
  }
}

namespace {

// gemm at `level` against the scalar gemm, bit for bit, for each weight type of `types`.
void bitwise_scalar_check(SimdLevel level, const std::vector<DType>& types) {
  std::mt19937 rng(23);
  constexpr int64_t kRows = 21;
  for (DType w : types) {
    CAPTURE(dtype_info(w).name);
    const int64_t be = dtype_info(w).block_elems;
    const std::vector<int64_t> sizes =
        be == 32 ? std::vector<int64_t>{32, 640, 896} : std::vector<int64_t>{256, 1024, 2048};
    for (int64_t n : sizes) {
      CAPTURE(n);
      const size_t ws = row_bytes(w, n), as = row_bytes(vec_dot_type(w), n);
      const auto W = random_blocks(w, kRows * n / be, rng);
      for (int64_t n_tok : {1, 3, 5, 16, 40}) {
        CAPTURE(n_tok);
        std::vector<uint8_t> A;
        for (int64_t t = 0; t < n_tok; ++t) {
          const auto row = make_acts(w, n, rng);
          A.insert(A.end(), row.begin(), row.end());
        }
        std::vector<float> got(static_cast<size_t>(kRows * n_tok)), want(got.size());
        gemm_at(level, w, n, W.data(), ws, 0, kRows, A.data(), as, n_tok, got.data(), kRows);
        gemm_at(SimdLevel::Scalar, w, n, W.data(), ws, 0, kRows, A.data(), as, n_tok, want.data(), kRows);
        for (size_t i = 0; i < got.size(); ++i) REQUIRE(hearth::fp32_to_bits(got[i]) == hearth::fp32_to_bits(want[i]));
      }
    }
  }
}

}  // namespace

// The AVX2 Q4_0 / Q5_0 / Q8_0 / Q4_K and the AVX-512 Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K kernels keep the
// scalar reference's arithmetic (exact integer sums per block, then combined with the scales
// in float, blocks in order), so they must agree with it bit for bit, at decode and at
// prefill batch sizes, on whole 16-row groups and a partial one.
TEST_CASE("AVX2 *_0 and Q4_K, AVX-512 *_0, Q4_K and Q6_K give the scalar reference's floats bit for bit", "[vec_dot]") {
  struct Case {
    SimdLevel level;
    std::vector<DType> types;
  };
  const std::vector<Case> cases = {
      {SimdLevel::AVX2, {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K}},
      {SimdLevel::AVX512, {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}}};
  for (const Case& c : cases) {
    if (detect_simd_level() < c.level) {
      WARN("skipped: this CPU has no " << simd_level_name(c.level));
      continue;
    }
    CAPTURE(simd_level_name(c.level));
    bitwise_scalar_check(c.level, c.types);
  }
}

TEST_CASE("quantize_activations is bitwise the scalar quantize_row at every level", "[vec_dot]") {
  std::mt19937 rng(11);
  for (DType at : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F32}) {
    CAPTURE(dtype_info(at).name);
    for (int64_t nb : {1, 2, 3, 5, 8}) {
      const int64_t n = nb * std::max<int64_t>(dtype_info(at).block_elems, 32);
      auto x = random_floats(n, rng, 3.0f);
      // Rounding ties: with amax = 127 the scale is 1 and k + 0.5 must round as the scalar
      // code does (Q8_0: away from zero; Q8_K: to even); an all-zero stretch; a value of
      // largest magnitude present with both signs (Q8_K takes the first).
      x[0] = 127.0f;
      for (int j = 1; j < 16; ++j) x[j] = static_cast<float>(j) - 8.5f;
      x[16] = -127.0f;
      if (n >= 96)
        for (int j = 64; j < 96; ++j) x[j] = 0.0f;
      for (SimdLevel level : supported_levels()) {
        CAPTURE(simd_level_name(level), n);
        std::vector<uint8_t> want(row_bytes(at, n)), got(row_bytes(at, n) + 3);
        quantize_row(at, x.data(), want.data(), n);
        quantize_activations_at(level, at, x.data(), got.data() + 3, n);  // misaligned dst
        REQUIRE(std::memcmp(want.data(), got.data() + 3, want.size()) == 0);
      }
    }
  }
}

TEST_CASE("vec_dot_type pairs each weight type with its ggml activation type", "[vec_dot]") {
  CHECK(vec_dot_type(DType::Q4_0) == DType::Q8_0);
  CHECK(vec_dot_type(DType::Q5_0) == DType::Q8_0);
  CHECK(vec_dot_type(DType::Q8_0) == DType::Q8_0);
  CHECK(vec_dot_type(DType::Q4_1) == DType::Q8_1);
  CHECK(vec_dot_type(DType::Q5_1) == DType::Q8_1);
  CHECK(vec_dot_type(DType::Q4_K) == DType::Q8_K);
  CHECK(vec_dot_type(DType::Q5_K) == DType::Q8_K);
  CHECK(vec_dot_type(DType::Q6_K) == DType::Q8_K);
  CHECK(vec_dot_type(DType::F32) == DType::F32);
  CHECK(vec_dot_type(DType::F16) == DType::F32);
  CHECK(vec_dot_type(DType::BF16) == DType::F32);
  for (DType w : kWeightTypes) CHECK(vec_dot_supported(w));
  CHECK_FALSE(vec_dot_supported(DType::Q2_K));
}

TEST_CASE("SIMD levels: detect, set (clamped to the CPU), parse and name", "[vec_dot]") {
  const SimdLevel best = detect_simd_level();
  const SimdLevel before = active_simd_level();
  CHECK(before <= best);
  CHECK(set_simd_level(SimdLevel::Scalar) == SimdLevel::Scalar);
  CHECK(active_simd_level() == SimdLevel::Scalar);
  // Asking for more than the CPU has gives the best it has.
  CHECK(set_simd_level(SimdLevel::AMX) == best);
  CHECK(active_simd_level() == best);
  set_simd_level(before);

  SimdLevel l = SimdLevel::Scalar;
  CHECK(parse_simd_level("avx2", &l));
  CHECK(l == SimdLevel::AVX2);
  CHECK(parse_simd_level("AVX512", &l));
  CHECK(l == SimdLevel::AVX512);
  CHECK(parse_simd_level("Scalar", &l));
  CHECK(l == SimdLevel::Scalar);
  CHECK_FALSE(parse_simd_level("sse9", &l));
  CHECK_FALSE(parse_simd_level("", &l));
  CHECK(l == SimdLevel::Scalar);
  for (SimdLevel x : {SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX512, SimdLevel::AMX}) {
    SimdLevel back;
    REQUIRE(parse_simd_level(simd_level_name(x), &back));
    CHECK(back == x);
  }
}

TEST_CASE("vec_dot and gemm use the active level", "[vec_dot]") {
  std::mt19937 rng(8);
  const SimdLevel before = active_simd_level();
  const auto w = random_blocks(DType::Q8_0, 20, rng);
  const auto a = make_acts(DType::Q8_0, 640, rng);
  for (SimdLevel level : supported_levels()) {
    set_simd_level(level);
    float y = 0;
    gemm(DType::Q8_0, 640, w.data(), 0, 0, 1, a.data(), 0, 1, &y, 1);
    CHECK(hearth::fp32_to_bits(vec_dot(DType::Q8_0, 640, w.data(), a.data())) ==
          hearth::fp32_to_bits(vec_dot_at(level, DType::Q8_0, 640, w.data(), a.data())));
    CHECK(hearth::fp32_to_bits(y) == hearth::fp32_to_bits(vec_dot_at(level, DType::Q8_0, 640, w.data(), a.data())));
  }
  set_simd_level(before);
}
