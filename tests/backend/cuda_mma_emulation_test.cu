// The tensor-core MatMul's warp program (backends/cuda/cu_matmul_mma.cuh: mma::warp_tile),
// run on the host: 32 threads play a warp's lanes, a barrier plays __syncwarp, memcpy plays
// cp.async, and mma.m16n8k8 is emulated from the PTX ISA's fragment tables (written out
// again here, not taken from the kernel): the lanes' fragments are gathered into A (16 x 8),
// B (8 x 8) and C (16 x 8), D = C + A B is computed in double and scattered back.
//
// What it checks without a GPU: that the kernel's own indexing - the staging of blocks, the
// pairs of chunks per lane, the A tile, the fragments' rows and columns, the token and row
// tails, a row's partial last chunk, the output addresses - computes the product, within
// what TF32 rounding allows, for every weight type; and that a token's result does not
// depend on the batch (here with a deterministic mma; on a GPU the hardware's adds, fixed
// per element, keep it so). What it cannot check: the hardware itself (cp.async, the real
// mma's rounding, shared-memory banks); the GPU runs backend_cuda_tests for that.
#include <algorithm>
#include <barrier>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cuda/cu_matmul_mma.cuh"
#include "backends/device_caps.h"
#include "common/dtype.h"

namespace {

using namespace hearth;
using namespace hearth::cuda;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// cvt.rna.tf32.f32: keep 10 mantissa bits, round to nearest with ties away from zero
// (adding half a unit to the magnitude bits carries into the exponent as it should).
uint32_t tf32_rna(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  // inf, nan
  return (u + 0x1000u) & 0xffffe000u;
}

struct WarpShared {
  std::barrier<> bar{32};
  uint32_t a[32][4] = {}, b[32][2] = {};
  float c[32][4] = {}, d[32][4] = {};
};

// The PTX ISA's mma.m16n8k8 .tf32 layouts, g = lane >> 2, t = lane % 4:
// A: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
// B: b0 (row t, col g), b1 (row t + 4, col g);
// C, D: c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
void emulate_mma(WarpShared& s) {
  double A[16][8], B[8][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    A[g][t] = from_bits(s.a[lane][0]);
    A[g + 8][t] = from_bits(s.a[lane][1]);
    A[g][t + 4] = from_bits(s.a[lane][2]);
    A[g + 8][t + 4] = from_bits(s.a[lane][3]);
    B[t][g] = from_bits(s.b[lane][0]);
    B[t + 4][g] = from_bits(s.b[lane][1]);
    for (int i = 0; i < 4; ++i) C[g + 8 * (i / 2)][2 * t + i % 2] = s.c[lane][i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), n = 2 * t + i % 2;
      double sum = C[r][n];
      for (int k = 0; k < 8; ++k) sum += A[r][k] * B[k][n];
      s.d[lane][i] = static_cast<float>(sum);
    }
  }
}

struct HostWarp {
  int lane_;
  WarpShared* s;
  int lane() const { return lane_; }
  void sync() const { s->bar.arrive_and_wait(); }
  template <int kSize>
  void copy(uint8_t* dst, const uint8_t* src) const {
    std::memcpy(dst, src, kSize);
  }
  void wait_copies() const {}
  uint32_t tf32(float f) const { return tf32_rna(f); }
  void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) const {
    std::copy(a, a + 4, s->a[lane_]);
    s->b[lane_][0] = b0;
    s->b[lane_][1] = b1;
    std::copy(c, c + 4, s->c[lane_]);
    sync();
    if (lane_ == 0) emulate_mma(*s);
    sync();
    std::copy(s->d[lane_], s->d[lane_] + 4, c);
  }
};

// The launch of mma_matmul_t: one warp at a time (warps share nothing), its 32 lanes on 32
// threads that run the grid's warps in turn, meeting at a barrier after each.
template <DType T>
void run_emulated(mma::Args p) {
  const mma::Grid gr = mma::grid_for(p.n_out, p.n_tok);
  p.n_tiles = gr.n_tiles;
  alignas(16) uint8_t sm[mma::kRows * mma::Stage<T>::kPitch];
  alignas(16) uint32_t at[mma::kRows * mma::kApitch];
  WarpShared shared;
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; ++lane)
    lanes.emplace_back([&, lane] {
      HostWarp wp{lane, &shared};
      for (int64_t block = 0; block < gr.blocks; ++block)
        for (int warp = 0; warp < mma::kWarps; ++warp) {
          if (gr.nt == 1) {
            mma::warp_tile<T, 1>(wp, p, block, warp, sm, at);
          } else {
            mma::warp_tile<T, 4>(wp, p, block, warp, sm, at);
          }
          wp.sync();
        }
    });
  for (std::thread& t : lanes) t.join();
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
      mma::Args p;
      p.w = wbuf.data() + c.misalign;
      p.w_stride = stride;
      p.n_out = c.n_out;
      p.n_in = c.n_in;
      p.x = reinterpret_cast<const uint8_t*>(x.data());
      p.x_stride = static_cast<size_t>(x_pitch) * sizeof(float);
      p.n_tok = n_tok;
      p.dst = reinterpret_cast<uint8_t*>(y.data());
      p.d_stride = static_cast<size_t>(c.n_out) * sizeof(float);
      run_emulated<T>(p);
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
