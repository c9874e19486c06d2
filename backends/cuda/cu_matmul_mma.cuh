// MatMul on tensor cores (compute capability 8.0 and newer): mma.sync m16n8k8 with TF32
// inputs and f32 accumulation, for every weight type, every batch size - decode included,
// so that a token's result never depends on which kernel its batch size would pick.
//
// A warp computes 16 output rows (the mma's M) for 8 * NT tokens (NT tiles of the mma's N).
// Per round it stages the 16 rows' next kChunks chunks into shared memory with cp.async
// (cu_matmul.cu's scheme, 16 rows at a time), then per pair of chunks: lane l dequantizes
// chunk (l / 16) of row (l % 16) in registers (cu_dequant.cuh, the CPU's values bit for bit),
// rounds it to TF32 and writes it to the warp's A tile; eight k-steps of 8 columns then
// read the A fragments from the tile and the B fragments (x, rounded to TF32) straight from
// global memory, one mma per token tile.
//
// Batch invariance: output (o, t) is accumulated by one thread's mma accumulator over the
// k-steps in increasing column order, from TF32 values that depend on nothing but w and x;
// an mma's result for one element depends only on that element's row of A, column of B and
// accumulator. n_tok, NT and the grid change which threads compute which outputs, never
// the order. Columns past n_in (a plain row's last chunk) are zero in A and in B; a second
// chunk past the row's end is skipped, which depends on n_in only.
//
// Numerics: TF32 keeps 10 of f32's 23 mantissa bits (rounded to nearest, ties away), so
// each product is within 2^-10 of the exact one: an error of at most ~1e-3 of sum |w x|,
// against f32's ~1e-7; less than the CPU's own rounding of x to 8 bits for quantized
// weights, more for float weights (tests/backend: matmul_tol).
//
// The warp's work is warp_tile() below, written against a Warp type that supplies the
// lane, __syncwarp, the async copies, TF32 rounding and the mma (cu_matmul_mma.cu's
// DeviceWarp), so that the loop reads without the PTX in it.
// tests/backend/cuda_mma_on_host_test.cpp runs the kernel file on the host
// (tests/backend/cuda_on_host.h, mma emulated from the PTX ISA's fragment tables) against
// a double-precision product.
//
// Chosen with HEARTH_CUDA_MATMUL=mma (CudaOptions::tensor_cores); not yet the default: it
// has been compiled for every architecture but never run on a GPU (backends/cuda/README.md).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cu_dequant.cuh"

namespace hearth::cuda::mma {

constexpr int kWarps = 4;  // warps per block, 16 output rows each
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16;                // the mma's M: output rows per warp
constexpr int kApitch = 2 * kChunk + 4;  // words per A-tile row: two chunks, +4 against bank conflicts

// One warp's staging for type T: kChunks chunks of each of its 16 rows, whole blocks, at
// most 256 bytes a row; rows kPitch bytes apart (a multiple of 16, for cp.async and for
// the 16-byte loads of plain chunks).
template <DType T>
struct Stage {
  static constexpr BlockGeom kGeom = block_geom(T);
  static constexpr int kChunks = chunks_per_block(T) > 1 ? chunks_per_block(T) : (256 / kGeom.bytes) & ~1;
  static constexpr int kSpan = kChunks / chunks_per_block(T) * kGeom.bytes;
  static constexpr int kPitch = (kSpan + 15) / 16 * 16;
  static_assert(kChunks >= 2 && kChunks % 2 == 0 && kSpan <= 256, "mma::Stage: a round is pairs of chunks");
};

// dst[t, o] = sum_i w[o, i] * x[t, i], as launch_matmul: byte strides, F32 x and dst.
struct Args {
  const uint8_t* w = nullptr;
  size_t w_stride = 0;
  int64_t n_out = 0, n_in = 0;
  const uint8_t* x = nullptr;
  size_t x_stride = 0;
  int64_t n_tok = 0;
  uint8_t* dst = nullptr;
  size_t d_stride = 0;
  int64_t n_tiles = 0;  // token tiles of 8 * NT
};

// The launch for n_out rows and n_tok tokens: NT token tiles of 8 per warp (1 for decode
// and small batches, 4 - 32 tokens per dequantized weight - otherwise), n_tiles of them,
// blocks = row groups of kWarps * kRows times n_tiles.
struct Grid {
  int nt = 1;
  int64_t n_tiles = 1, blocks = 0;
};
inline Grid grid_for(int64_t n_out, int64_t n_tok) {
  Grid gr;
  gr.nt = n_tok <= 8 ? 1 : 4;
  gr.n_tiles = (n_tok + 8 * gr.nt - 1) / (8 * gr.nt);
  gr.blocks = (n_out + kWarps * kRows - 1) / (kWarps * kRows) * gr.n_tiles;
  return gr;
}

// Copies len bytes of each of n_rows rows (src, src + stride, ...) into sm (rows `pitch`
// apart) in units of kSize bytes with the warp's async copy, the rest of each row in
// halfwords. src and stride are multiples of kSize; len is even.
#pragma nv_exec_check_disable
template <int kSize, class Warp>
HEARTH_HD void copy_rows(Warp& wp, const uint8_t* src, size_t stride, int n_rows, int len, uint8_t* sm, int pitch) {
  const int lane = wp.lane();
  const int units = kSize > 2 ? len / kSize : 0;
  if constexpr (kSize > 2) {
    for (int u = lane; u < n_rows * units; u += 32) {
      const int r = u / units, b = u % units * kSize;
      wp.template copy<kSize>(sm + r * pitch + b, src + static_cast<size_t>(r) * stride + b);
    }
  }
  const int halves = (len - units * kSize) / 2;
  if (halves == 0) return;
  for (int u = lane; u < n_rows * halves; u += 32) {
    const int r = u / halves, b = units * kSize + u % halves * 2;
    *reinterpret_cast<uint16_t*>(sm + r * pitch + b) =
        *reinterpret_cast<const uint16_t*>(src + static_cast<size_t>(r) * stride + b);
  }
}

// Stages the rows and waits: afterwards every lane of the warp sees them.
#pragma nv_exec_check_disable
template <class Warp>
HEARTH_HD void stage_rows(Warp& wp, const uint8_t* src, size_t stride, int n_rows, int len, uint8_t* sm, int pitch) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src) | stride;
  if (a % 16 == 0) {
    copy_rows<16>(wp, src, stride, n_rows, len, sm, pitch);
  } else if (a % 8 == 0) {
    copy_rows<8>(wp, src, stride, n_rows, len, sm, pitch);
  } else if (a % 4 == 0) {
    copy_rows<4>(wp, src, stride, n_rows, len, sm, pitch);
  } else {
    copy_rows<2>(wp, src, stride, n_rows, len, sm, pitch);
  }
  wp.wait_copies();
  wp.sync();
}

// What warp `warp` of block `block` computes: output rows 16 * (kWarps * (block / n_tiles)
// + warp) onwards, for token tile block % n_tiles. sm: the warp's staging, kRows *
// Stage<T>::kPitch bytes; at: its A tile, kRows * kApitch words; both 16-byte aligned.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
//   a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4)      [row, column of A]
//   b0 (q, g), b1 (q + 4, g)                                         [k, token]
//   c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1)   [row, token]
#pragma nv_exec_check_disable
template <DType T, int NT, class Warp>
HEARTH_HD void warp_tile(Warp& wp, const Args& p, int64_t block, int warp, uint8_t* sm, uint32_t* at) {
  using S = Stage<T>;
  const int lane = wp.lane();
  const int g = lane / 4, q = lane % 4;
  const int64_t o0 = (block / p.n_tiles * kWarps + warp) * kRows;
  if (o0 >= p.n_out) return;  // the whole warp: no lane of it takes part in an mma
  const int n_rows = static_cast<int>(std::min<int64_t>(kRows, p.n_out - o0));
  const int64_t t0 = block % p.n_tiles * 8 * NT;
  constexpr int kEsize = S::kGeom.bytes / kChunk;  // bytes per element of a plain type
  constexpr int kCpb = chunks_per_block(T);
  // This lane's dequantization: chunk `half` of each pair, of row `my_row`.
  const int my_row = lane % kRows, half = lane / kRows;

  // The x rows of this lane's B fragments (one token per tile); null past n_tok.
  const float* xr[NT];
  HEARTH_UNROLL
  for (int nt = 0; nt < NT; ++nt) {
    const int64_t t = t0 + nt * 8 + g;
    xr[nt] = t < p.n_tok ? reinterpret_cast<const float*>(p.x + static_cast<size_t>(t) * p.x_stride) : nullptr;
  }
  float acc[NT][4];
  HEARTH_UNROLL
  for (int nt = 0; nt < NT; ++nt)
    HEARTH_UNROLL
  for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;

  const int64_t n_chunks = (p.n_in + kChunk - 1) / kChunk;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += S::kChunks) {
    const int nc = static_cast<int>(std::min<int64_t>(S::kChunks, n_chunks - c0));
    const int len = is_plain(T) ? static_cast<int>(std::min<int64_t>(p.n_in - c0 * kChunk, nc * kChunk)) * kEsize
                                : nc / kCpb * S::kGeom.bytes;
    stage_rows(wp, p.w + static_cast<size_t>(o0) * p.w_stride + chunk_block_offset<T>(c0), p.w_stride, n_rows, len, sm,
               S::kPitch);
    for (int i = 0; i < nc; i += 2) {
      const int ci = i + half;
      float v[kChunk];
      if (my_row < n_rows && ci < nc) {
        const int n = static_cast<int>(std::min<int64_t>(kChunk, p.n_in - (c0 + ci) * kChunk));
        dequant_chunk<T>(sm + my_row * S::kPitch + ci / kCpb * S::kGeom.bytes, ci % kCpb, n, v);
      } else {
        HEARTH_UNROLL
        for (int j = 0; j < kChunk; ++j) v[j] = 0.0f;
      }
      auto* row4 = reinterpret_cast<uint4*>(at + my_row * kApitch + half * kChunk);
      HEARTH_UNROLL
      for (int k = 0; k < kChunk / 4; ++k)
        row4[k] = make_uint4(wp.tf32(v[4 * k]), wp.tf32(v[4 * k + 1]), wp.tf32(v[4 * k + 2]), wp.tf32(v[4 * k + 3]));
      wp.sync();

      const int64_t col0 = (c0 + i) * kChunk;  // x column of the tile's column 0
      const int steps = i + 1 < nc ? 8 : 4;    // a lone last chunk: its 4 k-steps only
      for (int s = 0; s < steps; ++s) {
        const int k = 8 * s;
        const uint32_t a[4] = {at[g * kApitch + k + q], at[(g + 8) * kApitch + k + q], at[g * kApitch + k + q + 4],
                               at[(g + 8) * kApitch + k + q + 4]};
        const int64_t c_lo = col0 + k + q, c_hi = c_lo + 4;
        HEARTH_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          const float lo = xr[nt] != nullptr && c_lo < p.n_in ? xr[nt][c_lo] : 0.0f;
          const float hi = xr[nt] != nullptr && c_hi < p.n_in ? xr[nt][c_hi] : 0.0f;
          wp.mma(acc[nt], a, wp.tf32(lo), wp.tf32(hi));
        }
      }
      wp.sync();  // the A tile is rewritten for the next pair
    }
  }

  HEARTH_UNROLL
  for (int nt = 0; nt < NT; ++nt)
    HEARTH_UNROLL
  for (int e = 0; e < 4; ++e) {
    const int r = g + 8 * (e / 2);
    const int64_t t = t0 + nt * 8 + 2 * q + e % 2;
    if (r < n_rows && t < p.n_tok) reinterpret_cast<float*>(p.dst + static_cast<size_t>(t) * p.d_stride)[o0 + r] = acc[nt][e];
  }
}

}  // namespace hearth::cuda::mma
