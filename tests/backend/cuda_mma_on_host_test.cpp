// The tensor-core MatMul (backends/cuda/cu_matmul_mma.cu, the file itself) run on the
// host by cuda_on_host.h: its blocks' threads as fibers, cp.async as copies, and
// mma.sync.m16n8k8 .tf32 emulated from the PTX ISA's fragment tables (the lanes' fragments
// gathered into A, B and C, D = C + A B in double, scattered back), TF32 rounding as
// cvt.rna does it.
//
// What it checks without a GPU: that the kernel's own indexing - the staging of blocks, the
// pairs of chunks per lane, the A tile, the fragments' rows and columns, the token and row
// tails, a row's partial last chunk, the output addresses - computes the product, within
// what TF32 rounding allows, for every weight type; and that a token's result does not
// depend on the batch (with a deterministic mma; on a GPU the hardware's adds, fixed per
// element, keep it so). What it cannot check: the hardware itself (cp.async, the real
// mma's rounding, shared-memory banks); the GPU runs backend_cuda_tests for that.
#include "cuda_on_host.h"
// (cuda_on_host.h first: it defines HEARTH_LAUNCH.)
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cuda/cu_matmul_mma.cu"
#include "backends/device_caps.h"
#include "common/dtype.h"

namespace {

using namespace hearth;
using namespace hearth::cuda;
using host_emu::tf32_rna;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  int64_t n_in, n_out;
  size_t misalign;  // bytes added to the weights' start and to their row stride
};

template <DType T>
void check_type(std::mt19937& rng) {
  std::vector<Case> cases;
  if constexpr (is_plain(T)) {
    cases = {{256, 37, 0}, {70, 20, 0}, {100, 131, 16}, {640, 16, 0}};
  } else if constexpr (chunks_per_block(T) == 1) {
    cases = {{256, 37, 0}, {640, 131, 2}, {96, 17, 6}};
  } else {
    cases = {{256, 37, 0}, {768, 131, 2}, {1024, 16, 16}};
  }
  for (const Case& c : cases) {
    INFO(dtype_name(T) << " n_in " << c.n_in << " n_out " << c.n_out << " misalign " << c.misalign);
    const size_t rb = row_bytes(T, c.n_in), stride = rb + c.misalign;
    std::vector<uint8_t> wbuf(c.misalign + stride * static_cast<size_t>(c.n_out) + 64, 0xAB);
    std::vector<float> wd(static_cast<size_t>(c.n_in * c.n_out)), row(static_cast<size_t>(c.n_in));
    std::normal_distribution<float> dist(0.0f, 0.5f);
    for (int64_t o = 0; o < c.n_out; ++o) {
      for (float& f : row) f = dist(rng);
      uint8_t* dst = wbuf.data() + c.misalign + static_cast<size_t>(o) * stride;
      cpu::quantize_row(T, row.data(), dst, c.n_in);
      cpu::dequantize_row(T, dst, &wd[static_cast<size_t>(o * c.n_in)], c.n_in);
    }
    std::vector<float> y_all;
    for (const int64_t n_tok : {int64_t{70}, int64_t{1}, int64_t{7}}) {
      // x rows with 4 NaNs after each (a read past n_in poisons the sum even where the
      // weights are zero), the same values for every n_tok.
      const int64_t x_pitch = c.n_in + 4;
      std::mt19937 xr(7);
      std::vector<float> x(static_cast<size_t>(x_pitch * n_tok), std::nanf(""));
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < c.n_in; ++i) x[static_cast<size_t>(t * x_pitch + i)] = dist(xr);
      std::vector<float> y(static_cast<size_t>(n_tok * c.n_out), -1.0f);
      const DevRows w{wbuf.data() + c.misalign, c.n_in, c.n_out, stride};
      const DevRows xv{x.data(), c.n_in, n_tok, static_cast<size_t>(x_pitch) * sizeof(float)};
      const DevRows yr{y.data(), c.n_out, n_tok, static_cast<size_t>(c.n_out) * sizeof(float)};
      launch_matmul_mma(T, w, xv, yr, nullptr);
      int64_t bad = 0;
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t o = 0; o < c.n_out; ++o) {
          double want = 0, abs_sum = 0;
          for (int64_t i = 0; i < c.n_in; ++i) {
            const double wx = double(wd[static_cast<size_t>(o * c.n_in + i)]) * x[static_cast<size_t>(t * x_pitch + i)];
            want += wx;
            abs_sum += std::fabs(wx);
          }
          // TF32 on both sides: each product within 2^-10 of exact.
          const double got = y[static_cast<size_t>(t * c.n_out + o)];
          if (!(std::fabs(got - want) <= 1e-3 * abs_sum + 1e-6)) {
            if (bad < 3) WARN("token " << t << " row " << o << ": got " << got << " want " << want);
            ++bad;
          }
        }
      CHECK(bad == 0);
      if (n_tok == 70) {  // three tiles of 32 tokens, the last partial
        y_all = y;
      } else {  // the first tokens alone give the bits they got among 70
        INFO("the first " << n_tok << " tokens alone");
        CHECK(std::memcmp(y.data(), y_all.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("CUDA tensor-core MatMul's warp program computes the product for every weight type (host emulation)") {
  std::mt19937 rng(20261205);
  // Ties round away from zero: 1 + 2^-11 lies halfway between TF32's 1 and 1 + 2^-10.
  CHECK(from_bits(tf32_rna(1.0f + 0x1.0p-11f)) == 1.0f + 0x1.0p-10f);
  CHECK(from_bits(tf32_rna(-1.0f - 0x1.0p-11f)) == -1.0f - 0x1.0p-10f);
  CHECK(from_bits(tf32_rna(1.0f + 0x1.0p-12f)) == 1.0f);
  for (DType t : kWeightTypes)
    if (!dispatch_weight_type(t, [&]<DType T>() { check_type<T>(rng); })) FAIL_CHECK("type " << dtype_name(t));
}
