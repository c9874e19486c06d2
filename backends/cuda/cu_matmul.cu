// MatMul of a weight of any supported type with f32 activations, and GetRows (embedding
// lookup), the weights dequantized in registers by cu_dequant.cuh.
//
// MatMul (the Vulkan matmul.comp's scheme): one warp per output row o; lane l takes the
// row's 32-element chunks c = l, l + 32, l + 64, ... in increasing order; each chunk is
// dequantized once and dotted with TT token rows of x; the 32 lane sums are then added by
// a fixed xor butterfly. The grid covers (row groups of kWarps rows) x (token tiles of TT).
//
// Batch invariance: for each token the arithmetic is the same whatever n_tok, TT or tile:
// a chunk's dot is 4 fma chains over elements j % 4 == 0..3, summed (p0 + p1) + (p2 + p3);
// a lane adds its chunk dots in chunk order; the butterfly is fixed. Every operation is an
// explicit fmaf / __fadd_rn, so nvcc cannot contract differently in the TT = 1 and TT = 8
// instances. Only n_in decides the order.
//
// Weight loads: a warp first copies up to Stage::kChunks chunks of its row into its own
// slice of shared memory with coalesced cp.async copies as wide as the row's alignment allows
// (16 bytes on 16-aligned rows), then each lane dequantizes its chunk from there: read
// straight from global memory, blocks of 18 or 210 bytes would take one 2-byte load per
// lane per halfword, each spread over many cache lines. The x values are read by each lane
// from global memory (L1); see the note at matmul_kernel on what that costs.
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cu_dequant.cuh"
#include "backends/cuda/cu_kernels.h"

namespace hearth::cuda {
namespace {

constexpr int kWarps = 4;  // output rows per block
constexpr int kThreads = 32 * kWarps;
constexpr int kTokTile = 8;  // TT for batches: each dequantized chunk is used for 8 tokens

// The shared-memory slice of one warp for type T: kChunks chunks, their blocks back to
// back; plain types get kPad bytes after each 32-element chunk so that lanes reading their
// chunk with 16-byte loads hit distinct banks (a 128- or 64-byte lane stride would not).
// A slice is a few KB: enough bytes in flight per warp for decode.
template <DType T>
struct Stage {
  static constexpr BlockGeom kGeom = block_geom(T);
  static constexpr int kChunks = T == DType::F32 ? 32 : is_plain(T) ? 64 : 128;
  static constexpr int kPad = is_plain(T) ? 16 : 0;
  static constexpr int kBytes = kChunks / chunks_per_block(T) * (kGeom.bytes + kPad);
};

// Starts copying len bytes from src (global) into the warp's slice in units of kSize bytes
// (4, 8 or 16; src aligned to it) with cp.async, which needs no registers and keeps many
// loads in flight (before sm_80 it is a plain copy); the tail, or all of a row that is only
// 2-byte aligned, goes in halfwords. The caller waits (stage_wait).
template <DType T, int kSize>
__device__ __forceinline__ void copy_units(const uint8_t* __restrict__ src, int len, uint8_t* sm, int lane) {
  constexpr int kBlock = Stage<T>::kGeom.bytes, kPad = Stage<T>::kPad;
  // A unit never straddles a block: blocks start at multiples of kSize from src.
  const int n_units = kSize > 2 ? len / kSize : 0;
  if constexpr (kSize > 2) {
    for (int b = kSize * lane; b < n_units * kSize; b += 32 * kSize)
      __pipeline_memcpy_async(sm + b + b / kBlock * kPad, src + b, kSize);
  }
  for (int b = n_units * kSize + 2 * lane; b < len; b += 64)
    *reinterpret_cast<uint16_t*>(sm + b + b / kBlock * kPad) = *reinterpret_cast<const uint16_t*>(src + b);
}

template <DType T>
__device__ __forceinline__ void stage_copy(const uint8_t* src, int len, uint8_t* sm, int lane) {
  const auto a = reinterpret_cast<uintptr_t>(src);  // the same in every lane: one row per warp
  if (a % 16 == 0) {
    copy_units<T, 16>(src, len, sm, lane);
  } else if (a % 8 == 0) {
    copy_units<T, 8>(src, len, sm, lane);
  } else if (a % 4 == 0) {
    copy_units<T, 4>(src, len, sm, lane);
  } else {
    copy_units<T, 2>(src, len, sm, lane);
  }
  __pipeline_commit();
}

// After it, every lane of the warp sees the whole slice.
__device__ __forceinline__ void stage_wait() {
  __pipeline_wait_prior(0);
  __syncwarp();
}

// The dot of a dequantized chunk with 32 floats of x (n < 32: a plain row's last chunk).
// x_vec: x rows are 16-byte aligned, so full chunks load as float4 (same arithmetic).
__device__ __forceinline__ float chunk_dot(const float v[kChunk], const float* __restrict__ x, int n, bool x_vec) {
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (x_vec && n == kChunk) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float4 q = reinterpret_cast<const float4*>(x)[k];
      p[0] = fmaf(v[4 * k], q.x, p[0]);
      p[1] = fmaf(v[4 * k + 1], q.y, p[1]);
      p[2] = fmaf(v[4 * k + 2], q.z, p[2]);
      p[3] = fmaf(v[4 * k + 3], q.w, p[3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) p[j % 4] = fmaf(v[j], j < n ? x[j] : 0.0f, p[j % 4]);
  }
  return __fadd_rn(__fadd_rn(p[0], p[1]), __fadd_rn(p[2], p[3]));
}

// Block b: token tile b % n_tiles (fastest, so that consecutive blocks read the same weight
// rows while they are in L2), rows kWarps * (b / n_tiles) + warp.
//
// Measured on an H200 (14336 x 4096 weights): decode 0.47 TB/s of weights for Q4_0, 0.83
// for Q8_0, 0.64 for Q6_K, 1.5 for F16; about 2 TFLOP/s for every type and batch size.
// The bound is the x reads: lane l reads its chunk's 128 contiguous x bytes, so each
// 16-byte load of a warp touches 32 cache lines. The next step is to stage an x window in
// shared memory per block (one chunk slot per lane, padded against bank conflicts).
//
// MatMulExperts (kExperts): the tiles are (token, rank) pairs p = t * k + j of one expert.
// TT = 1: tile p, its expert e = ids[t, j] (decode); TT = 8: tile g of the grouping
// group_pairs_kernel wrote (up to 8 pairs of one expert; g past the last tile returns). A
// pair reads the rows of its expert (n_out rows per expert, stacked), its input row (t, or
// p when ex.per_pair) and writes dst row p: the arithmetic of MatMul for that expert's slice
// and that row, whatever its tile. An id outside [0, n_expert) writes zeros.
struct ExpertIds {
  const uint8_t* ids = nullptr;  // I32 [n_tok, k]
  size_t stride = 0;             // bytes between tokens' rows of ids
  int64_t k = 1, n_expert = 0;
  bool per_pair = false;
  const uint32_t* groups = nullptr;  // TT > 1: group_pairs_kernel's output
};

// One block: sorts the n_pairs pairs by bucket b = their expert (n_expert for an id outside
// the experts), stable, for tiles of tt pairs. groups (E = n_expert + 1 buckets):
//   [0, E]           off[b]: bucket b's first pair in the list (off[E] = n_pairs)
//   [E + 1, 2E + 1]  first tile of bucket b (the last: the number of tiles)
//   [2E + 2, ...)    the pairs, by bucket, in increasing order within one.
__global__ void group_pairs_kernel(ExpertIds ex, int64_t n_pairs, int64_t tt, uint32_t* groups) {
  const int64_t E = ex.n_expert + 1;
  uint32_t *off = groups, *first_tile = groups + E + 1, *list = groups + 2 * E + 2;
  auto bucket = [&](int64_t p) {
    const int32_t e = reinterpret_cast<const int32_t*>(ex.ids + static_cast<size_t>(p / ex.k) * ex.stride)[p % ex.k];
    return e >= 0 && e < ex.n_expert ? static_cast<int64_t>(e) : ex.n_expert;
  };
  for (int64_t b = threadIdx.x; b < E; b += blockDim.x) {
    uint32_t c = 0;
    for (int64_t p = 0; p < n_pairs; ++p) c += bucket(p) == b ? 1u : 0u;
    off[b + 1] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    off[0] = 0;
    first_tile[0] = 0;
    for (int64_t b = 0; b < E; ++b) {
      const uint32_t c = off[b + 1];
      first_tile[b + 1] = first_tile[b] + static_cast<uint32_t>((c + tt - 1) / tt);
      off[b + 1] = off[b] + c;
    }
  }
  __syncthreads();
  for (int64_t b = threadIdx.x; b < E; b += blockDim.x) {
    uint32_t at = off[b];
    for (int64_t p = 0; p < n_pairs; ++p)
      if (bucket(p) == b) list[at++] = static_cast<uint32_t>(p);
  }
}

template <DType T, int TT, bool kExperts = false>
__global__ void __launch_bounds__(kThreads)
    matmul_kernel(const uint8_t* __restrict__ w, size_t w_stride, int64_t n_out, int64_t n_in,
                  const uint8_t* __restrict__ x, size_t x_stride, int64_t n_tok, bool x_vec, uint8_t* __restrict__ dst,
                  size_t d_stride, int64_t n_tiles, ExpertIds ex) {
  using S = Stage<T>;
  __shared__ __align__(16) uint8_t stage_sh[kWarps][S::kBytes];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t tile = blockIdx.x % n_tiles;
  const int64_t o = blockIdx.x / n_tiles * kWarps + warp;
  if (o >= n_out) return;  // the whole warp: no lane of it takes part in a shuffle below
  int64_t t0 = tile * TT;
  int nt = static_cast<int>(min(static_cast<int64_t>(TT), n_tok - t0));
  const uint8_t* row = w + static_cast<size_t>(o) * w_stride;
  // Experts: byte offsets of each tile row's x and dst rows (MatMul: (t0 + t) * stride).
  size_t xoff[kExperts ? TT : 1] = {}, doff[kExperts ? TT : 1] = {};
  (void)ex;
  if constexpr (kExperts) {
    int64_t pr[TT] = {}, b = 0;
    if constexpr (TT == 1) {
      pr[0] = tile;
      const int32_t e = reinterpret_cast<const int32_t*>(ex.ids + static_cast<size_t>(tile / ex.k) * ex.stride)[tile % ex.k];
      b = e >= 0 && e < ex.n_expert ? e : ex.n_expert;
      nt = 1;
    } else {  // the same for the whole block
      const int64_t E = ex.n_expert + 1;
      const uint32_t *off = ex.groups, *first_tile = ex.groups + E + 1, *list = ex.groups + 2 * E + 2;
      if (tile >= first_tile[E]) return;
      while (first_tile[b + 1] <= tile) ++b;
      const int64_t first = off[b] + (tile - first_tile[b]) * TT;
      nt = static_cast<int>(min(static_cast<int64_t>(TT), static_cast<int64_t>(off[b + 1]) - first));
#pragma unroll
      for (int t = 0; t < TT; ++t) pr[t] = t < nt ? list[first + t] : 0;
    }
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      xoff[t] = static_cast<size_t>(ex.per_pair ? pr[t] : pr[t] / ex.k) * x_stride;
      doff[t] = static_cast<size_t>(pr[t]) * d_stride;
    }
    if (b == ex.n_expert) {  // the same for the whole block
      for (int t = 0; t < nt; ++t)
        if (lane == 0) reinterpret_cast<float*>(dst + doff[t])[o] = 0.0f;
      return;
    }
    row = w + (static_cast<size_t>(b) * static_cast<size_t>(n_out) + static_cast<size_t>(o)) * w_stride;
    t0 = 0;
  }
  uint8_t* sm = stage_sh[warp];
  constexpr int kEsize = S::kGeom.bytes / kChunk;  // bytes per element of a plain type
  constexpr int kCpb = chunks_per_block(T);

  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  const int64_t n_chunks = (n_in + kChunk - 1) / kChunk;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += S::kChunks) {
    const int nc = static_cast<int>(min(static_cast<int64_t>(S::kChunks), n_chunks - c0));
    const int len = is_plain(T) ? static_cast<int>(min(n_in - c0 * kChunk, static_cast<int64_t>(nc) * kChunk)) * kEsize
                                : nc / kCpb * S::kGeom.bytes;
    stage_copy<T>(row + chunk_block_offset<T>(c0), len, sm, lane);
    stage_wait();
#pragma unroll 1
    for (int i = lane; i < nc; i += 32) {  // chunk c0 + i: a lane's chunks come in increasing order
      const int64_t c = c0 + i;
      const int n = static_cast<int>(min(static_cast<int64_t>(kChunk), n_in - c * kChunk));
      float v[kChunk];
      dequant_chunk<T>(sm + i / kCpb * (S::kGeom.bytes + S::kPad), i % kCpb, n, v);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t < nt) {
          const size_t xo = kExperts ? xoff[kExperts ? t : 0] : static_cast<size_t>(t0 + t) * x_stride;
          const auto* xr = reinterpret_cast<const float*>(x + xo) + c * kChunk;
          acc[t] = __fadd_rn(acc[t], chunk_dot(v, xr, n, x_vec));
        }
      }
    }
    __syncwarp();  // the slice is refilled next round
  }

#pragma unroll
  for (int t = 0; t < TT; ++t) {
    // xor butterfly: lane l adds lane l ^ off; a + b == b + a, so all lanes end equal.
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[t] = __fadd_rn(acc[t], __shfl_xor_sync(0xFFFFFFFFu, acc[t], off));
    const size_t d_at = kExperts ? doff[kExperts ? t : 0] : static_cast<size_t>(t0 + t) * d_stride;
    if (lane == t && t < nt) reinterpret_cast<float*>(dst + d_at)[o] = acc[t];
  }
}

// One block per id; table rows are read straight from global memory (small: n_ids rows).
template <DType T>
__global__ void __launch_bounds__(kThreads)
    get_rows_kernel(const uint8_t* __restrict__ table, size_t t_stride, int64_t n_rows, int64_t ne0,
                    const int32_t* __restrict__ ids, float scale, uint8_t* __restrict__ dst, size_t d_stride) {
  const int64_t i = blockIdx.x;
  const int32_t id = ids[i];
  auto* out = reinterpret_cast<float*>(dst + static_cast<size_t>(i) * d_stride);
  if (id < 0 || id >= n_rows) {  // the graph check rejects these; write zeros, read nothing
    for (int64_t e = threadIdx.x; e < ne0; e += blockDim.x) out[e] = 0.0f;
    return;
  }
  const uint8_t* row = table + static_cast<size_t>(id) * t_stride;
  if constexpr (is_plain(T)) {
    for (int64_t e = threadIdx.x; e < ne0; e += blockDim.x) out[e] = plain_element<T>(row, e) * scale;
  } else {
    for (int64_t c = threadIdx.x; c < ne0 / kChunk; c += blockDim.x) {
      float v[kChunk];
      dequant_chunk<T>(row + chunk_block_offset<T>(c), static_cast<int>(c % chunks_per_block(T)), kChunk, v);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) out[c * kChunk + j] = v[j] * scale;
    }
  }
}

template <DType T>
void matmul_t(const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  const int64_t row_groups = (w.rows + kWarps - 1) / kWarps;
  const bool x_vec = reinterpret_cast<uintptr_t>(x.ptr) % 16 == 0 && x.stride % 16 == 0;
  const auto* wp = static_cast<const uint8_t*>(w.ptr);
  const auto* xp = static_cast<const uint8_t*>(x.ptr);
  auto* dp = static_cast<uint8_t*>(dst.ptr);
  if (x.rows == 1) {  // decode: matrix x vector, no registers spent on a token tile
    HEARTH_LAUNCH(static_cast<unsigned>(row_groups), kThreads, stream, matmul_kernel<T, 1>)(
        wp, w.stride, w.rows, w.ne0, xp, x.stride, 1, x_vec, dp, dst.stride, 1, ExpertIds{});
  } else {
    const int64_t n_tiles = (x.rows + kTokTile - 1) / kTokTile;
    HEARTH_LAUNCH(static_cast<unsigned>(row_groups * n_tiles), kThreads, stream, matmul_kernel<T, kTokTile>)(
        wp, w.stride, w.rows, w.ne0, xp, x.stride, x.rows, x_vec, dp, dst.stride, n_tiles, ExpertIds{});
  }
}

template <DType T>
void matmul_experts_t(const DevRows& w, const DevRows& x, const ExpertIds& ex, int64_t n_pairs, const DevRows& dst,
                      cudaStream_t stream) {
  const int64_t n_out = dst.ne0;
  const int64_t row_groups = (n_out + kWarps - 1) / kWarps;
  const bool x_vec = reinterpret_cast<uintptr_t>(x.ptr) % 16 == 0 && x.stride % 16 == 0;
  const auto* wp = static_cast<const uint8_t*>(w.ptr);
  const auto* xp = static_cast<const uint8_t*>(x.ptr);
  auto* dp = static_cast<uint8_t*>(dst.ptr);
  if (ex.groups == nullptr) {
    HEARTH_LAUNCH(static_cast<unsigned>(row_groups * n_pairs), kThreads, stream, matmul_kernel<T, 1, true>)(
        wp, w.stride, n_out, w.ne0, xp, x.stride, 1, x_vec, dp, dst.stride, n_pairs, ex);
  } else {
    // At most ceil(n_pairs / TT) + n_expert + 1 tiles; the blocks past the last return.
    const int64_t n_tiles = (n_pairs + kTokTile - 1) / kTokTile + ex.n_expert + 1;
    HEARTH_LAUNCH(static_cast<unsigned>(row_groups * n_tiles), kThreads, stream, matmul_kernel<T, kTokTile, true>)(
        wp, w.stride, n_out, w.ne0, xp, x.stride, 1, x_vec, dp, dst.stride, n_tiles, ex);
  }
}

template <DType T>
void get_rows_t(const DevRows& table, const int32_t* ids, int64_t n_ids, float scale, const DevRows& dst,
                cudaStream_t stream) {
  HEARTH_LAUNCH(static_cast<unsigned>(n_ids), kThreads, stream, get_rows_kernel<T>)(
      static_cast<const uint8_t*>(table.ptr), table.stride, table.rows, table.ne0, ids, scale,
      static_cast<uint8_t*>(dst.ptr), dst.stride);
}

}  // namespace

bool weight_type_supported(DType type) {
  // (A capture-default, so the generic lambda has no conversion to a function pointer.)
  return dispatch_weight_type(type, [&]<DType>() {});
}

void launch_matmul(DType type, const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  if (w.rows == 0 || x.rows == 0) return;
  dispatch_weight_type(type, [&]<DType T>() { matmul_t<T>(w, x, dst, stream); });
}

size_t matmul_experts_scratch_bytes(int64_t n_tok, int64_t k, int64_t n_expert) {
  if (n_tok <= 1) return 0;
  return static_cast<size_t>(2 * (n_expert + 2) + n_tok * k) * sizeof(uint32_t);
}

void launch_matmul_experts(DType type, const DevRows& w, const DevRows& x, const DevRows& ids, bool per_pair,
                           void* scratch, const DevRows& dst, cudaStream_t stream) {
  const int64_t n_pairs = ids.rows * ids.ne0;
  if (n_pairs == 0 || dst.ne0 == 0) return;
  ExpertIds ex;
  ex.ids = static_cast<const uint8_t*>(ids.ptr);
  ex.stride = ids.stride;
  ex.k = ids.ne0;
  ex.n_expert = w.rows / dst.ne0;
  ex.per_pair = per_pair;
  if (ids.rows > 1 && scratch != nullptr) {
    ex.groups = static_cast<const uint32_t*>(scratch);
    HEARTH_LAUNCH(1, 64, stream, group_pairs_kernel)(ex, n_pairs, kTokTile, static_cast<uint32_t*>(scratch));
  }
  dispatch_weight_type(type, [&]<DType T>() { matmul_experts_t<T>(w, x, ex, n_pairs, dst, stream); });
}

void launch_get_rows(DType type, const DevRows& table, const int32_t* ids, int64_t n_ids, float scale,
                     const DevRows& dst, cudaStream_t stream) {
  if (n_ids == 0 || table.ne0 == 0) return;
  dispatch_weight_type(type, [&]<DType T>() { get_rows_t<T>(table, ids, n_ids, scale, dst, stream); });
}

}  // namespace hearth::cuda
