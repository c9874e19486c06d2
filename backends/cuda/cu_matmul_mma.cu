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
// tests/backend/cuda_mma_on_host_test.cpp runs this file on the host
// (tests/backend/cuda_on_host.h, which emulates mma from the PTX ISA's fragment tables)
// against a double-precision product.
//
// Chosen with HEARTH_CUDA_MATMUL=mma (CudaOptions::tensor_cores); not yet the default: it
// has been compiled for every architecture but never run on a GPU (backends/cuda/README.md).
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cu_dequant.cuh"
#include "backends/cuda/cu_kernels.h"

namespace hearth::cuda {
namespace {


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
  static_assert(kChunks >= 2 && kChunks % 2 == 0 && kSpan <= 256, "Stage: a round is pairs of chunks");
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
Grid grid_for(int64_t n_out, int64_t n_tok) {
  Grid gr;
  gr.nt = n_tok <= 8 ? 1 : 4;
  gr.n_tiles = (n_tok + 8 * gr.nt - 1) / (8 * gr.nt);
  gr.blocks = (n_out + kWarps * kRows - 1) / (kWarps * kRows) * gr.n_tiles;
  return gr;
}

// Copies len bytes of each of n_rows rows (src, src + stride, ...) into sm (rows `pitch`
// apart) in units of kSize bytes with cp.async, the rest of each row in
// halfwords. src and stride are multiples of kSize; len is even.
template <int kSize>
__device__ __forceinline__ void copy_rows(const uint8_t* src, size_t stride, int n_rows, int len, uint8_t* sm,
                                          int pitch, int lane) {
  const int units = kSize > 2 ? len / kSize : 0;
  if constexpr (kSize > 2) {
    for (int u = lane; u < n_rows * units; u += 32) {
      const int r = u / units, b = u % units * kSize;
      __pipeline_memcpy_async(sm + r * pitch + b, src + static_cast<size_t>(r) * stride + b, kSize);
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
__device__ __forceinline__ void stage_rows(const uint8_t* src, size_t stride, int n_rows, int len, uint8_t* sm,
                                           int pitch, int lane) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src) | stride;
  if (a % 16 == 0) {
    copy_rows<16>(src, stride, n_rows, len, sm, pitch, lane);
  } else if (a % 8 == 0) {
    copy_rows<8>(src, stride, n_rows, len, sm, pitch, lane);
  } else if (a % 4 == 0) {
    copy_rows<4>(src, stride, n_rows, len, sm, pitch, lane);
  } else {
    copy_rows<2>(src, stride, n_rows, len, sm, pitch, lane);
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncwarp();
}

// f32 -> TF32 (round to nearest, ties away from zero), as the 32-bit pattern mma reads.
__device__ __forceinline__ uint32_t to_tf32(float f) {
  uint32_t r = 0;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
#elif defined(HEARTH_CUDA_ON_HOST)  // tests/backend/cuda_on_host.h
  r = host_emu::tf32_rna(f);
#else
  (void)f;
#endif
  return r;
}

// c += A (16 x 8) * B (8 x 8), fragments as mma_kernel describes.
__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(HEARTH_CUDA_ON_HOST)
  host_emu::mma_tf32(c, a, b0, b1);
#else
  (void)c, (void)a, (void)b0, (void)b1;
  __trap();  // launch_matmul_mma is never called below compute capability 8.0
#endif
}

// Block b: output rows 16 * (kWarps * (b / n_tiles) + warp) onwards for each warp, token
// tile b % n_tiles.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
//   a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4)      [row, column of A]
//   b0 (q, g), b1 (q + 4, g)                                         [k, token]
//   c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1)   [row, token]
template <DType T, int NT>
__global__ void __launch_bounds__(kThreads) mma_kernel(Args p) {
  using S = Stage<T>;
  __shared__ __align__(16) uint8_t stage_sh[kWarps][kRows * S::kPitch];
  __shared__ __align__(16) uint32_t a_sh[kWarps][kRows * kApitch];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t block = blockIdx.x;
  uint8_t* sm = stage_sh[warp];
  uint32_t* at = a_sh[warp];
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
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int64_t t = t0 + nt * 8 + g;
    xr[nt] = t < p.n_tok ? reinterpret_cast<const float*>(p.x + static_cast<size_t>(t) * p.x_stride) : nullptr;
  }
  float acc[NT][4] = {};

  const int64_t n_chunks = (p.n_in + kChunk - 1) / kChunk;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += S::kChunks) {
    const int nc = static_cast<int>(std::min<int64_t>(S::kChunks, n_chunks - c0));
    const int len = is_plain(T) ? static_cast<int>(std::min<int64_t>(p.n_in - c0 * kChunk, nc * kChunk)) * kEsize
                                : nc / kCpb * S::kGeom.bytes;
    stage_rows(p.w + static_cast<size_t>(o0) * p.w_stride + chunk_block_offset<T>(c0), p.w_stride, n_rows, len, sm,
               S::kPitch, lane);
    for (int i = 0; i < nc; i += 2) {
      const int ci = i + half;
      float v[kChunk];
      if (my_row < n_rows && ci < nc) {
        const int n = static_cast<int>(std::min<int64_t>(kChunk, p.n_in - (c0 + ci) * kChunk));
        dequant_chunk<T>(sm + my_row * S::kPitch + ci / kCpb * S::kGeom.bytes, ci % kCpb, n, v);
      } else {
#pragma unroll
        for (int j = 0; j < kChunk; ++j) v[j] = 0.0f;
      }
      auto* row4 = reinterpret_cast<uint4*>(at + my_row * kApitch + half * kChunk);
#pragma unroll
      for (int k = 0; k < kChunk / 4; ++k)
        row4[k] = make_uint4(to_tf32(v[4 * k]), to_tf32(v[4 * k + 1]), to_tf32(v[4 * k + 2]), to_tf32(v[4 * k + 3]));
      __syncwarp();

      const int64_t col0 = (c0 + i) * kChunk;  // x column of the tile's column 0
      const int steps = i + 1 < nc ? 8 : 4;    // a lone last chunk: its 4 k-steps only
      for (int s = 0; s < steps; ++s) {
        const int k = 8 * s;
        const uint32_t a[4] = {at[g * kApitch + k + q], at[(g + 8) * kApitch + k + q], at[g * kApitch + k + q + 4],
                               at[(g + 8) * kApitch + k + q + 4]};
        const int64_t c_lo = col0 + k + q, c_hi = c_lo + 4;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float lo = xr[nt] != nullptr && c_lo < p.n_in ? xr[nt][c_lo] : 0.0f;
          const float hi = xr[nt] != nullptr && c_hi < p.n_in ? xr[nt][c_hi] : 0.0f;
          mma_tf32(acc[nt], a, to_tf32(lo), to_tf32(hi));
        }
      }
      __syncwarp();  // the A tile is rewritten for the next pair
    }
  }

#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e / 2);
      const int64_t t = t0 + nt * 8 + 2 * q + e % 2;
      if (r < n_rows && t < p.n_tok)
        reinterpret_cast<float*>(p.dst + static_cast<size_t>(t) * p.d_stride)[o0 + r] = acc[nt][e];
    }
  }
}

template <DType T>
void mma_matmul_t(const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  Args p;
  p.w = static_cast<const uint8_t*>(w.ptr);
  p.w_stride = w.stride;
  p.n_out = w.rows;
  p.n_in = w.ne0;
  p.x = static_cast<const uint8_t*>(x.ptr);
  p.x_stride = x.stride;
  p.n_tok = x.rows;
  p.dst = static_cast<uint8_t*>(dst.ptr);
  p.d_stride = dst.stride;
  const Grid gr = grid_for(w.rows, x.rows);
  p.n_tiles = gr.n_tiles;
  if (gr.nt == 1) {
    HEARTH_LAUNCH(static_cast<unsigned>(gr.blocks), kThreads, stream, mma_kernel<T, 1>)(p);
  } else {
    HEARTH_LAUNCH(static_cast<unsigned>(gr.blocks), kThreads, stream, mma_kernel<T, 4>)(p);
  }
}

}  // namespace

void launch_matmul_mma(DType type, const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  if (w.rows == 0 || x.rows == 0) return;
  dispatch_weight_type(type, [&]<DType T>() { mma_matmul_t<T>(w, x, dst, stream); });
}

}  // namespace hearth::cuda
