// The pure-math helpers of the CUDA kernels (backends/cuda/cu_common.cuh), run on the host
// against the CPU backend's own functions: KV stores must write the CPU's bytes exactly
// (F16 rounding, Q8_0 quantization), and RoPE must start from the CPU's angles. No GPU needed.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cuda/cu_common.cuh"
#include "backends/rope_math.h"
#include "common/fp16.h"

namespace {

using hearth::cuda::f16_bits_to_f32;
using hearth::cuda::f32_bits;
using hearth::cuda::f32_from_bits;
using hearth::cuda::f32_to_f16_bits;

}  // namespace

TEST_CASE("cuda f16 to f32 equals common/fp16.h for all 65536 halves", "[cuda][host]") {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = f16_bits_to_f32(static_cast<uint16_t>(h));
    const float b = hearth::fp16_to_fp32(static_cast<uint16_t>(h));
    INFO("half bits " << h);
    REQUIRE(f32_bits(a) == f32_bits(b));
  }
}

TEST_CASE("cuda f32 to f16 rounds like common/fp16.h at every rounding boundary", "[cuda][host]") {
  // Every half value, the floats next to it and the midpoints to its neighbours (where round
  // to nearest even decides), as float bit patterns of both signs.
  std::vector<uint32_t> probes;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const uint32_t x = f32_bits(hearth::fp16_to_fp32(static_cast<uint16_t>(h)));
    const uint32_t next = f32_bits(hearth::fp16_to_fp32(static_cast<uint16_t>(h + 1)));
    const uint32_t mid = f32_bits((f32_from_bits(x) + f32_from_bits(next)) * 0.5f);  // exact in f32
    for (uint32_t p : {x, x + 1, x - 1, mid, mid + 1, mid - 1}) {
      probes.push_back(p);
      probes.push_back(p | 0x80000000u);
    }
  }
  // Overflow, infinities, NaNs with payloads, the smallest floats.
  for (uint32_t p : {0x477fefffu, 0x477ff000u, 0x477ff001u, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fffffffu,
                     0x7fa5a5a5u, 0x00000001u, 0x007fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu}) {
    probes.push_back(p);
    probes.push_back(p | 0x80000000u);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) probes.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t p : probes) {
    const float f = f32_from_bits(p);
    INFO("float bits " << p);
    REQUIRE(f32_to_f16_bits(f) == hearth::fp32_to_fp16(f));
  }
}

TEST_CASE("cuda Q8_0 quantization writes cpu::quantize_row's bytes", "[cuda][host]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-50.0f, 50.0f);
  for (int64_t n : {32, 64, 256, 896, 4096}) {
    for (int kind = 0; kind < 6; ++kind) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) {
        switch (kind) {
          case 0:  // plain values
            x[i] = wide(rng);
            break;
          case 1:  // zeros: d = 0, id = 0
            x[i] = 0.0f;
            break;
          case 2:  // exact multiples of amax / 127 and halfway points: round half away from zero
            x[i] = static_cast<float>(static_cast<int>(i % 255) - 127) * 0.5f;
            break;
          case 3:  // tiny values: a subnormal f16 scale
            x[i] = wide(rng) * 1e-7f;
            break;
          case 4:  // huge values: the f16 scale overflows to inf
            x[i] = wide(rng) * 1e5f;
            break;
          default:  // one large element per block, -0.0 and small ones elsewhere
            x[i] = i % 32 == 5 ? -wide(rng) * 10.0f : (i % 3 == 0 ? -0.0f : wide(rng) * 1e-3f);
            break;
        }
      }
      std::vector<uint8_t> ours(static_cast<size_t>(n / 32) * 34), cpu(ours.size());
      hearth::cuda::quantize_row_q8_0(x.data(), ours.data(), n);
      hearth::cpu::quantize_row(hearth::DType::Q8_0, x.data(), cpu.data(), n);
      INFO("n " << n << " kind " << kind);
      REQUIRE(std::memcmp(ours.data(), cpu.data(), ours.size()) == 0);
    }
  }
}

TEST_CASE("cuda rope angles are the CPU's float products", "[cuda][host]") {
  // The CPU (ops_basic.cpp, op_rope) starts at pos * f1 and multiplies by
  // rope_theta_ratio(base, n_rot) once per pair, in float.
  for (float base : {10000.0f, 100000.0f, 1000000.0f}) {
    for (int n_rot : {32, 64, 128, 256}) {
      const float ratio = hearth::rope_theta_ratio(base, n_rot);
      for (int32_t pos : {0, 1, 7, 511, 4095, 32767}) {
        for (float f1 : {1.0f, 0.25f}) {
          float theta = static_cast<float>(pos) * f1;
          for (int j = 0; j < n_rot / 2; ++j) {
            INFO("base " << base << " n_rot " << n_rot << " pos " << pos << " j " << j);
            REQUIRE(f32_bits(hearth::cuda::rope_theta(pos, f1, ratio, j)) == f32_bits(theta));
            theta *= ratio;
          }
        }
      }
    }
  }
}
