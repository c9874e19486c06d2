// The CUDA kernels' chunk dequantization (backends/cuda/cu_dequant.cuh), run on the host,
// against the CPU reference cpu::dequantize_row, bit for bit, for every weight type the
// CUDA backend takes. Needs nvcc but no GPU: it catches block layout and formula slips
// (a wrong nibble, scale index or fused multiply-add) on any CI machine. Build it with
// -ffp-contract=off for the host compiler, as quant_ref.cpp is.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cuda/cu_dequant.cuh"
#include "common/dtype.h"
#include "common/fp16.h"

namespace {

using namespace hearth;
using namespace hearth::cuda;

// Calls f.template operator()<T>() for every weight type of the CUDA backend.
template <class F>
void for_each_weight_type(F&& f) {
  f.template operator()<DType::F32>();
  f.template operator()<DType::F16>();
  f.template operator()<DType::BF16>();
  f.template operator()<DType::Q4_0>();
  f.template operator()<DType::Q4_1>();
  f.template operator()<DType::Q5_0>();
  f.template operator()<DType::Q5_1>();
  f.template operator()<DType::Q8_0>();
  f.template operator()<DType::Q4_K>();
  f.template operator()<DType::Q5_K>();
  f.template operator()<DType::Q6_K>();
}

// Byte offsets of the fp16 fields (d, m / dmin) of a block: random bytes there could be
// inf or nan, whose products are not what this test is about.
std::vector<int> half_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q6_K:
      return {208};
    default:
      return {};
  }
}

// Dequantizes the row at `row` chunk by chunk with dequant_chunk<T> and compares every
// element's bits with cpu::dequantize_row; returns the number of differing elements.
template <DType T>
int64_t count_mismatches(const uint8_t* row, int64_t n) {
  std::vector<float> ref(static_cast<size_t>(n));
  cpu::dequantize_row(T, row, ref.data(), n);
  int64_t bad = 0;
  for (int64_t c = 0; c * kChunk < n; ++c) {
    const int nc = static_cast<int>(std::min<int64_t>(kChunk, n - c * kChunk));
    // Plain types: the kernels hand over the chunk's first element.
    const uint8_t* p = is_plain(T) ? row + c * block_geom(T).bytes : row + chunk_block_offset<T>(c);
    float v[kChunk];
    dequant_chunk<T>(p, static_cast<int>(c % chunks_per_block(T)), nc, v);
    for (int j = 0; j < kChunk; ++j) {
      const float want = j < nc ? ref[static_cast<size_t>(c * kChunk + j)] : 0.0f;
      if (fp32_to_bits(v[j]) != fp32_to_bits(want)) {
        if (bad < 5)
          WARN(dtype_name(T) << " n=" << n << " element " << c * kChunk + j << ": got " << v[j] << " want " << want);
        ++bad;
      }
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("CUDA block geometry matches the GGUF types") {
  for_each_weight_type([&]<DType T>() {
    INFO(dtype_name(T));
    if constexpr (!is_plain(T)) {
      CHECK(block_geom(T).elems == dtype_info(T).block_elems);
      CHECK(static_cast<size_t>(block_geom(T).bytes) == dtype_info(T).block_bytes);
    } else {
      CHECK(static_cast<size_t>(block_geom(T).bytes) == 32 * dtype_info(T).block_bytes);
    }
    CHECK(block_geom(T).elems % kChunk == 0);
  });
}

TEST_CASE("CUDA chunk dequantization equals cpu::dequantize_row bit for bit, for every weight type") {
  std::mt19937 rng(20240611);
  for_each_weight_type([&]<DType T>() {
    const int64_t be = dtype_info(T).block_elems;
    // Plain rows of odd lengths end in a partial chunk; block rows are whole blocks.
    const std::vector<int64_t> sizes =
        is_plain(T) ? std::vector<int64_t>{1, 31, 32, 33, 100, 256, 1000} : std::vector<int64_t>{be, 4 * be, 12 * be};
    for (const int64_t n : sizes) {
      // Magnitudes from fp16-subnormal scales to large ones.
      for (const float scale : {1e-6f, 0.02f, 1.0f, 300.0f}) {
        INFO(dtype_name(T) << " n=" << n << " scale=" << scale);
        std::normal_distribution<float> dist(0.0f, scale);
        std::vector<float> x(static_cast<size_t>(n));
        for (float& f : x) f = dist(rng);
        x[0] = 0.0f;
        // 64 bytes of slack (a plain chunk reads 32 elements' bytes), the row at an offset
        // that is 2 mod 16: the device only guarantees 2-byte aligned blocks.
        std::vector<uint8_t> buf(row_bytes(T, n) + 64, 0xAB);
        uint8_t* row = buf.data() + 2;
        cpu::quantize_row(T, x.data(), row, n);
        CHECK(count_mismatches<T>(row, n) == 0);
      }
      if constexpr (!is_plain(T)) {
        // Random bytes reach every bit pattern of quants, scales and high bits (the
        // quantizers produce only some), with finite random fp16 scale fields.
        INFO(dtype_name(T) << " n=" << n << " random bytes");
        std::uniform_int_distribution<int> byte(0, 255);
        std::normal_distribution<float> dist(0.0f, 0.1f);
        std::vector<uint8_t> buf(row_bytes(T, n) + 64);
        uint8_t* row = buf.data() + 2;
        for (uint8_t& b : buf) b = static_cast<uint8_t>(byte(rng));
        for (int64_t blk = 0; blk < n / be; ++blk) {
          for (const int off : half_fields(T)) {
            const uint16_t h = fp32_to_fp16(dist(rng));
            std::memcpy(row + blk * static_cast<int64_t>(dtype_info(T).block_bytes) + off, &h, 2);
          }
        }
        CHECK(count_mismatches<T>(row, n) == 0);
      }
    }
  });
}

TEST_CASE("CUDA plain_element reads F32, F16 and BF16 rows as the CPU does") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for_each_weight_type([&]<DType T>() {
    if constexpr (is_plain(T)) {
      INFO(dtype_name(T));
      constexpr int64_t n = 77;
      std::vector<float> x(n), ref(n);
      for (float& f : x) f = dist(rng);
      std::vector<uint8_t> row(row_bytes(T, n));
      cpu::quantize_row(T, x.data(), row.data(), n);
      cpu::dequantize_row(T, row.data(), ref.data(), n);
      int64_t bad = 0;
      for (int64_t e = 0; e < n; ++e) bad += fp32_to_bits(plain_element<T>(row.data(), e)) != fp32_to_bits(ref[e]);
      CHECK(bad == 0);
    }
  });
}
