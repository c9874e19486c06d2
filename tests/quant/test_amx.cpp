// The AMX level's prefill GEMMs (gemm_amx.inc) against the AVX-512 level and the scalar
// reference, bit for bit: the tiles form the same exact integer sums, so a token's floats
// must not depend on whether its batch went through tiles. Skipped, with the reason, where
// the CPU has no AMX-INT8 or Linux refused the tile state.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"
#include "common/fp16.h"
#include "quant_test_util.h"

using hearth::DType;
using hearth::dtype_info;
using hearth::row_bytes;
using namespace hearth::cpu;
using namespace hearth::test;

namespace {

bool amx_or_skip() {
  if (detect_simd_level() >= SimdLevel::AMX) return true;
  WARN("skipped: no AMX level here (the CPU lacks AMX-INT8, Linux refused the tile state, or the compiler the flags)");
  return false;
}

// n_tok activation rows of n elements (Q8_K for the K types, Q8_0 otherwise). extreme: every
// quant at +-127 with one sign per row (the largest integer sums the kernels can see).
std::vector<uint8_t> activations(DType w, int64_t n, int64_t n_tok, bool extreme, std::mt19937& rng) {
  const DType at = vec_dot_type(w);
  std::vector<uint8_t> A;
  for (int64_t t = 0; t < n_tok; ++t) {
    auto x = random_floats(n, rng);
    if (extreme)
      for (auto& v : x) v = t % 2 ? -1.0f : 1.0f;
    std::vector<uint8_t> a(row_bytes(at, n));
    quantize_row(at, x.data(), a.data(), n);
    A.insert(A.end(), a.begin(), a.end());
  }
  return A;
}

// Weights with every quant (and the K types' scales) at an extreme: the bytes after the
// scale fields all 0xFF (Q4_0 / Q5_0: 15 - 8, 31 - 16; Q4_K: q 15, scales and mins 63), or
// 0x80 (Q8_0: -128); Q6_K: q 63 - 32 and its int8 scales -128.
void saturate(DType w, std::vector<uint8_t>& W) {
  const size_t bb = dtype_info(w).block_bytes, skip = w == DType::Q4_K ? 4 : 2;
  for (size_t b = 0; b + bb <= W.size(); b += bb) {
    if (w == DType::Q6_K) {  // ql, qh, then 16 scales, then the f16 d
      std::memset(W.data() + b, 0xFF, 192);
      std::memset(W.data() + b + 192, 0x80, 16);
    } else {
      std::memset(W.data() + b + skip, w == DType::Q8_0 ? 0x80 : 0xFF, bb - skip);
    }
  }
}

void require_same(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) {
      REQUIRE(std::isnan(got[i]));
    } else {
      REQUIRE(hearth::fp32_to_bits(got[i]) == hearth::fp32_to_bits(want[i]));
    }
  }
}

// gemm on repacked rows [r0, r1) at AMX = at AVX-512 = the scalar gemm on the plain rows.
void check_shape(DType w, int64_t n, int64_t rows, int64_t n_tok, int64_t r0, int64_t r1, bool extreme,
                 std::mt19937& rng) {
  CAPTURE(dtype_info(w).name, n, rows, n_tok, r0, r1, extreme);
  const size_t ws = row_bytes(w, n), as = row_bytes(vec_dot_type(w), n);
  auto W = random_blocks(w, rows * n / dtype_info(w).block_elems, rng);
  if (extreme) saturate(w, W);
  std::vector<uint8_t> R(repacked_bytes(w, n, rows));
  repack_rows(w, n, W.data(), ws, rows, R.data());
  const auto A = activations(w, n, n_tok, extreme, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> amx(static_cast<size_t>(rows * n_tok), nan), avx512(amx.size(), nan), scalar(amx.size(), nan);
  gemm_repacked_at(SimdLevel::AMX, w, n, R.data(), r0, r1, A.data(), as, n_tok, amx.data(), rows);
  gemm_repacked_at(SimdLevel::AVX512, w, n, R.data(), r0, r1, A.data(), as, n_tok, avx512.data(), rows);
  gemm_at(SimdLevel::Scalar, w, n, W.data(), ws, r0, r1, A.data(), as, n_tok, scalar.data(), rows);
  require_same(amx, avx512);
  require_same(amx, scalar);
}

}  // namespace

TEST_CASE("AMX prefill GEMMs give the AVX-512 and scalar floats bit for bit", "[amx]") {
  if (!amx_or_skip()) return;
  std::mt19937 rng(43);
  for (DType w : {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q5_0, DType::Q8_0}) {
    // Token counts: below one tile (AVX-512 only), one tile, tiles plus 1-15 left, more than
    // one 256-token chunk; rows: several groups, a middle group alone; an odd block count.
    const bool k = dtype_info(w).block_elems == 256;
    for (int64_t n : k ? std::vector<int64_t>{256, 768, 2304} : std::vector<int64_t>{32, 96, 640}) {
      for (int64_t n_tok : {15, 16, 17, 31, 32, 45, 64, 100, 300}) {
        check_shape(w, n, 48, n_tok, 0, 48, false, rng);
        check_shape(w, n, 48, n_tok, 16, 32, false, rng);
      }
    }
    check_shape(w, k ? 2304 : 640, 32, 48, 0, 32, true, rng);
  }
}

TEST_CASE("HEARTH_AMX=0 and HEARTH_SIMD lower the level below AMX, and amx is a level name", "[amx]") {
  CHECK(level_from_env(SimdLevel::AMX, nullptr, nullptr) == SimdLevel::AMX);
  CHECK(level_from_env(SimdLevel::AMX, nullptr, "0") == SimdLevel::AVX512);
  CHECK(level_from_env(SimdLevel::AMX, nullptr, "1") == SimdLevel::AMX);
  CHECK(level_from_env(SimdLevel::AMX, "avx512", nullptr) == SimdLevel::AVX512);
  CHECK(level_from_env(SimdLevel::AMX, "avx2", "0") == SimdLevel::AVX2);
  CHECK(level_from_env(SimdLevel::AVX512, "amx", nullptr) == SimdLevel::AVX512);  // never above the CPU
  CHECK(level_from_env(SimdLevel::AVX512, nullptr, "0") == SimdLevel::AVX512);
  CHECK(std::string(simd_level_name(SimdLevel::AMX)) == "amx");
  SimdLevel l = SimdLevel::Scalar;
  CHECK(parse_simd_level("AMX", &l));
  CHECK(l == SimdLevel::AMX);
  if (!amx_or_skip()) return;
  const SimdLevel before = active_simd_level();
  CHECK(set_simd_level(SimdLevel::AMX) == SimdLevel::AMX);
  set_simd_level(before);
}
