// The row-interleaved layouts of repack.h: exact round trips, and gemm on repacked rows
// giving, bit for bit, what gemm gives on the plain rows, at every level and batch size.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"
#include "quant_test_util.h"

using hearth::DType;
using hearth::dtype_info;
using hearth::row_bytes;
using namespace hearth::cpu;
using namespace hearth::test;

namespace {

// The sizes each type's rows come in (multiples of its block).
std::vector<int64_t> row_sizes(DType w) {
  return dtype_info(w).block_elems == 32 ? std::vector<int64_t>{32, 640, 896} : std::vector<int64_t>{256, 1024};
}

}  // namespace

TEST_CASE("repacked Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K rows unpack to the plain rows bit for bit", "[repack]") {
  std::mt19937 rng(31);
  for (DType w : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    CAPTURE(dtype_info(w).name);
    for (int64_t n : row_sizes(w)) {
      for (int64_t rows : {16, 48}) {
        CAPTURE(n, rows);
        const size_t ws = row_bytes(w, n);
        const auto W = random_blocks(w, rows * n / dtype_info(w).block_elems, rng);
        // Q4_K keeps its 6-bit scales a byte each: 16 bytes a row instead of 12.
        const size_t extra = w == DType::Q4_K ? static_cast<size_t>(rows * (n / 256) * 4) : 0;
        REQUIRE(repacked_bytes(w, n, rows) == W.size() + extra);
        std::vector<uint8_t> R(repacked_bytes(w, n, rows)), back(W.size(), 0xAB);
        repack_rows(w, n, W.data(), ws, rows, R.data());
        REQUIRE(!std::equal(W.begin(), W.end(), R.begin()));  // interleaved, not a copy
        unrepack_rows(w, n, R.data(), rows, back.data(), ws);
        REQUIRE(back == W);
        // One row at a time (GetRows of a repacked table), each group's first, middle, last.
        for (int64_t r : {int64_t{0}, int64_t{7}, int64_t{15}, rows - 1, rows - 16}) {
          std::vector<uint8_t> row(ws, 0xCD);
          unrepack_row(w, n, R.data(), r, row.data());
          REQUIRE(std::equal(row.begin(), row.end(), W.begin() + r * static_cast<int64_t>(ws)));
        }
      }
    }
  }
}

TEST_CASE("repacking is chosen only where a kernel reads the layout", "[repack]") {
  CHECK_FALSE(repack_useful(DType::Q5_K, detect_simd_level(), 4864, 64));
  CHECK_FALSE(repack_useful(DType::Q5_0, SimdLevel::Scalar, 896, 64));
  CHECK_FALSE(repack_useful(DType::Q5_0, detect_simd_level(), 896, 20));  // not whole 16-row groups
  CHECK_FALSE(repack_useful(DType::Q5_0, detect_simd_level(), 896, 0));
  if (detect_simd_level() >= SimdLevel::AVX2) {  // the *_0 types and Q4_K (gemm_q0_avx2.inc, gemm_q4k_avx2.inc)
    CHECK(repack_useful(DType::Q5_0, SimdLevel::AVX2, 896, 64));
    CHECK(repack_useful(DType::Q4_0, SimdLevel::AVX2, 640, 16));
    CHECK(repack_useful(DType::Q8_0, SimdLevel::AVX2, 640, 262144));
    CHECK(repack_useful(DType::Q4_K, SimdLevel::AVX2, 4864, 896));
    CHECK_FALSE(repack_useful(DType::Q4_K, SimdLevel::AVX2, 896, 64));  // not whole super-blocks
    CHECK_FALSE(repack_useful(DType::Q6_K, SimdLevel::AVX2, 4864, 896));
  }
  if (detect_simd_level() >= SimdLevel::AVX512) {
    CHECK(repack_useful(DType::Q5_0, SimdLevel::AVX512, 896, 64));
    CHECK(repack_useful(DType::Q4_0, SimdLevel::AVX512, 640, 16));
    CHECK(repack_useful(DType::Q8_0, SimdLevel::AVX512, 640, 262144));
    CHECK(repack_useful(DType::Q4_K, SimdLevel::AVX512, 4864, 896));
    CHECK(repack_useful(DType::Q6_K, SimdLevel::AVX512, 4864, 896));
    CHECK_FALSE(repack_useful(DType::Q4_K, SimdLevel::AVX512, 896, 64));  // not whole super-blocks
  }
}

// Every level: with a kernel for the layout (AVX-512) or through its fallback (each group
// back to plain rows, then that level's gemm), the floats of gemm on the plain rows.
TEST_CASE("gemm on repacked rows gives gemm's floats on the plain rows, at every level and batch", "[repack]") {
  std::mt19937 rng(37);
  constexpr int64_t kRows = 48, kTok = 73;
  for (DType w : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    CAPTURE(dtype_info(w).name);
    for (int64_t n : row_sizes(w)) {
      CAPTURE(n);
      const DType at = vec_dot_type(w);
      const size_t ws = row_bytes(w, n), as = row_bytes(at, n);
      const auto W = random_blocks(w, kRows * n / dtype_info(w).block_elems, rng);
      std::vector<uint8_t> R(repacked_bytes(w, n, kRows));
      repack_rows(w, n, W.data(), ws, kRows, R.data());
      std::vector<uint8_t> A;
      for (int64_t t = 0; t < kTok; ++t) {
        const auto x = random_floats(n, rng);
        std::vector<uint8_t> a(as);
        quantize_row(at, x.data(), a.data(), n);
        A.insert(A.end(), a.begin(), a.end());
      }
      for (SimdLevel level : supported_levels()) {
        CAPTURE(simd_level_name(level));
        for (int64_t n_tok : {1, 2, 3, 4, 5, 8, 9, 17, 64, 73}) {
          // Odd and even numbers of 16-row groups: one token reads a
          // call's groups as one stream or as two (its halves side by side).
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, kRows}, {16, 32}, {32, 48}, {0, 32}, {16, 48}}) {
            const float nan = std::numeric_limits<float>::quiet_NaN();
            std::vector<float> want(static_cast<size_t>(kRows * kTok), nan);
            gemm_at(level, w, n, W.data(), ws, r0, r1, A.data(), as, n_tok, want.data(), kRows);
            for (int streams : {1, 2}) {
              CAPTURE(n_tok, r0, r1, streams);
              std::vector<float> got(want.size(), nan);
              const int before = set_decode_streams(streams);
              gemm_repacked_at(level, w, n, R.data(), r0, r1, A.data(), as, n_tok, got.data(), kRows);
              set_decode_streams(before);
              for (size_t i = 0; i < got.size(); ++i) {
                if (std::isnan(want[i])) {
                  REQUIRE(std::isnan(got[i]));
                } else {
                  REQUIRE(hearth::fp32_to_bits(got[i]) == hearth::fp32_to_bits(want[i]));
                }
              }
            }
          }
        }
      }
    }
  }
}
