// The weighted-sum kernels continue a sum from memory exactly as they would have in
// registers, so attention can walk its values in tiles without changing a bit: the prompt
// cache's KV rows are computed from these outputs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"

namespace {

using namespace hearth;

std::vector<cpu::SimdLevel> levels() {
  std::vector<cpu::SimdLevel> out{cpu::SimdLevel::Scalar};
  if (cpu::detect_simd_level() >= cpu::SimdLevel::AVX2) out.push_back(cpu::SimdLevel::AVX2);
  if (cpu::detect_simd_level() >= cpu::SimdLevel::AVX512) out.push_back(cpu::SimdLevel::AVX512);
  return out;
}

}  // namespace

// Summing keys [0, a) and then accumulating [a, n_j) onto the stored sums equals one call
// over [0, n_j), for every split, 1 to kAttnMaxGroup heads, f32, f16 and Q8_0 value rows,
// head sizes with and without a partial 16 (and Q8_0 heads off the 16-element grid).
TEST_CASE("Attention's weighted sums continue from memory as from registers at every SIMD level") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (cpu::SimdLevel level : levels()) {
    const cpu::AttnKernels k = cpu::attn_kernels(level);
    INFO(cpu::simd_level_name(level));
    for (int64_t n : {256, 64, 72, 5}) {
      const int64_t n_j = 45, col = n == 5 ? 8 : 32, width = ((col + n + 31) / 32) * 32;
      std::vector<float> f(static_cast<size_t>(n_j * width));
      for (float& x : f) x = u(rng);
      std::vector<uint16_t> h(f.size());
      const size_t q8_row = row_bytes(DType::Q8_0, width);
      std::vector<uint8_t> q8(static_cast<size_t>(n_j) * q8_row);
      std::vector<const uint16_t*> h_rows(static_cast<size_t>(n_j));
      std::vector<const uint8_t*> q8_rows(static_cast<size_t>(n_j));
      for (int64_t j = 0; j < n_j; ++j) {
        cpu::quantize_row(DType::F16, f.data() + j * width, h.data() + j * width, width);
        cpu::quantize_row(DType::Q8_0, f.data() + j * width, q8.data() + j * q8_row, width);
        h_rows[static_cast<size_t>(j)] = h.data() + j * width;
        q8_rows[static_cast<size_t>(j)] = q8.data() + j * q8_row;
      }
      for (int heads = 1; heads <= cpu::kAttnMaxGroup; ++heads) {
        std::vector<std::vector<float>> wv(static_cast<size_t>(heads), std::vector<float>(static_cast<size_t>(n_j)));
        const float* w[cpu::kAttnMaxGroup];
        for (int hh = 0; hh < heads; ++hh) {
          for (float& x : wv[static_cast<size_t>(hh)]) x = u(rng);
          w[hh] = wv[static_cast<size_t>(hh)].data();
        }
        // Each kind of value row: sum(out, w, first key, keys, accumulate).
        const auto sum_f32 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum(out, ww, heads, f.data() + j * width + col, width, m, n, acc);
        };
        const auto sum_f16 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum_f16(out, ww, heads, h_rows.data() + j, col, m, n, acc);
        };
        const auto sum_q8 = [&](float* const* out, const float* const* ww, int64_t j, int64_t m, bool acc) {
          k.weighted_sum_q8_0(out, ww, heads, q8_rows.data() + j, col, m, n, acc);
        };
        const auto check = [&](auto sum) {
          std::vector<float> whole(static_cast<size_t>(heads * n), 7.0f), split(whole);
          float* wo[cpu::kAttnMaxGroup];
          float* so[cpu::kAttnMaxGroup];
          for (int hh = 0; hh < heads; ++hh) wo[hh] = whole.data() + hh * n;
          sum(wo, w, 0, n_j, false);
          for (int64_t a = 0; a <= n_j; a += 4) {
            std::fill(split.begin(), split.end(), 0.0f);  // a = 0: accumulating from zeros
            for (int hh = 0; hh < heads; ++hh) so[hh] = split.data() + hh * n;
            if (a > 0) sum(so, w, 0, a, false);
            const float* rest[cpu::kAttnMaxGroup];
            for (int hh = 0; hh < heads; ++hh) rest[hh] = w[hh] + a;
            if (a < n_j) sum(so, rest, a, n_j - a, true);
            REQUIRE(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
          }
        };
        INFO("n " << n << " heads " << heads);
        check(sum_f32);
        if (k.weighted_sum_f16 != nullptr) check(sum_f16);
        if (k.weighted_sum_q8_0 != nullptr) check(sum_q8);
      }
    }
  }
}
