// KV cache stores and attention of the CUDA backend (cu_kernels.h; semantics in backend.h,
// OpKind::StoreKv and OpKind::Attention; the CPU backend's ops_attention.cpp is the reference).
//
// Attention, for query row t (position p = positions[t]) and head h (KV head
// h / (n_heads / n_kv_heads)): keys j in [jb, je), jb = max(0, p - window + 1) (0 without a
// window), je = min(n_kv, p + 1), read through slots[j]; s_j = scale * q.k_j, softcapped when
// softcap > 0; out = softmax(s) . V. An empty range writes zeros.
//
// A block of 4 warps takes 4 (query row, head) pairs of one KV head (the heads of a group,
// then the next query rows), one pair per warp. The block walks the union of its pairs' key
// ranges in tiles of kTile keys: all 128 threads stage the tile's key and value rows (this
// head's part), converted to f32, in shared memory, many loads in flight per thread (a few
// trips to memory per tile, and one conversion for all 4 pairs; the next tile's slots are
// fetched while this one is used); then each warp takes the
// keys of the tile inside its own range with an online softmax (running maximum m, running
// sum l, an accumulator rescaled by exp(m_old - m_new) per tile), so any number of keys
// works in registers:
//   - scores: every lane multiplies the query elements it owns (d = lane + 32 i) with each
//     key's, and one reduce-scatter over the warp leaves key k's dot product in lane k;
//   - values: lane-owned output elements, each key's weight broadcast from its lane, keys
//     in increasing order.
//
// Long caches with few (row, head) pairs (decode) would leave the GPU idle, so the key range
// of every row is split over several blocks (grid z); each writes its partial (m, l,
// unnormalised accumulator) to the scratch memory, and a second kernel merges them:
// M = max m_s, out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M) (splits that saw no key
// have m_s = -inf and are skipped). Scratch layout: float partials, one record of
// head_dim + 2 floats [m, l, acc[0 .. head_dim)] per (row t, head h, split s), at record
// index (t * n_heads + h) * n_split + s.
//
// A row's result does not depend on the other rows of the batch, so that a token computes
// the same values alone (decode, a prompt-cache hit's suffix) as inside a longer prefill
// (the prompt cache's hits equal cold only so): tiles lie on a fixed grid of absolute key
// positions (multiples of kTile), so a key always meets the same lane and the same tile
// companions; splits are absolute ranges of kSplitKeys keys ([s L, (s + 1) L)), and a pass
// splits whenever its longest range reaches past the first such boundary. A row whose keys
// lie inside one split gets, from the merge of one partial, exactly the unsplit result
// (e^0 = 1, acc * 1, l * 1), and a row whose keys cross a boundary is split in every pass
// it can be in.
#include <algorithm>
#include <cmath>

#include "backends/cuda/cu_common.cuh"
#include "backends/cuda/cu_kernels.h"

namespace hearth::cuda {
namespace {

// --- KV rows ------------------------------------------------------------------------------
enum class Kv { F32, F16, Q8_0 };

// Element e of a cache row that starts at `row`. F16 rows are 2-byte aligned, F32 rows
// 4-byte aligned; Q8_0 rows may start anywhere. d * q is exact in f32, as the CPU's
// dequantization.
template <Kv kKv>
__device__ __forceinline__ float kv_element(const char* row, int64_t e) {
  if constexpr (kKv == Kv::F32) {
    return reinterpret_cast<const float*>(row)[e];
  } else if constexpr (kKv == Kv::F16) {
    return f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[e]);
  } else {
    const auto* blk = reinterpret_cast<const uint8_t*>(row) + (e / kQ8Block) * kQ8BlockBytes;
    // Blocks are 34 bytes, so in any row of even address (all in practice) every scale is
    // 2-byte aligned and one load; the byte-wise read covers any other layout.
    const uint16_t d = (reinterpret_cast<uintptr_t>(blk) & 1u) == 0 ? *reinterpret_cast<const uint16_t*>(blk)
                                                                    : static_cast<uint16_t>(blk[0] | (blk[1] << 8));
    return static_cast<float>(static_cast<int8_t>(blk[2 + e % kQ8Block])) * f16_bits_to_f32(d);
  }
}

// --- StoreKv --------------------------------------------------------------------------------
constexpr int kStoreBlock = 256;

// F32 / F16: one thread per element (grid x), rows looped over grid y, z = 0 keys / 1 values.
template <Kv kKv>
__global__ void store_kv_plain_kernel(const void* k, size_t k_stride, const void* v, size_t v_stride,
                                      const int32_t* slots, int64_t n_tok, int64_t width, void* kc, size_t kc_stride,
                                      void* vc, size_t vc_stride) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= width) return;
  const bool is_v = blockIdx.z == 1;
  const void* src = is_v ? v : k;
  const size_t src_stride = is_v ? v_stride : k_stride;
  void* cache = is_v ? vc : kc;
  const size_t cache_stride = is_v ? vc_stride : kc_stride;
  for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
    const float x = row_ptr<float>(src, t, src_stride)[e];
    if constexpr (kKv == Kv::F32) {
      row_ptr<float>(cache, slots[t], cache_stride)[e] = x;
    } else {
      row_ptr<uint16_t>(cache, slots[t], cache_stride)[e] = f32_to_f16_bits(x);
    }
  }
}

// Q8_0: one warp per block of 32 elements, lane i quantizing element i; amax by a warp max
// (exact and order-free: every |x| is a non-NaN value >= 0 after q8_0_amax_step), then the
// CPU's d, 1 / d and round(x / d) in the same float operations.
__global__ void store_kv_q8_0_kernel(const void* k, size_t k_stride, const void* v, size_t v_stride,
                                     const int32_t* slots, int64_t n_tok, int64_t width, void* kc, size_t kc_stride,
                                     void* vc, size_t vc_stride) {
  const int64_t blk = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (blk >= width / kQ8Block) return;  // uniform per warp
  const bool is_v = blockIdx.z == 1;
  const void* src = is_v ? v : k;
  const size_t src_stride = is_v ? v_stride : k_stride;
  void* cache = is_v ? vc : kc;
  const size_t cache_stride = is_v ? vc_stride : kc_stride;
  for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
    const float x = row_ptr<float>(src, t, src_stride)[blk * kQ8Block + lane];
    const float amax = warp_max(q8_0_amax_step(0.0f, x));
    const Q8Scale s = q8_0_scale(amax);
    uint8_t* out = row_ptr<uint8_t>(cache, slots[t], cache_stride) + blk * kQ8BlockBytes;
    if (lane == 0) {
      const uint16_t dh = f32_to_f16_bits(s.d);
      out[0] = static_cast<uint8_t>(dh & 0xffu);
      out[1] = static_cast<uint8_t>(dh >> 8);
    }
    out[2 + lane] = static_cast<uint8_t>(q8_0_quant(x, s.id));
  }
}

// --- attention ------------------------------------------------------------------------------
constexpr int kAttnWarps = 4;  // (row, head) pairs per block
constexpr int kAttnThreads = kAttnWarps * kWarp;
constexpr int kMaxHeadDim = 512;
// Splitting: absolute parts of kSplitKeys keys (a multiple of every tile size; small enough
// that a decode step over a few thousand keys spreads over tens of blocks). The scratch a
// pass needs grows with rows x splits, so a pass of many rows over a long cache runs in
// launches of at most kMaxScratchBytes of partials each (rows are independent).
constexpr int64_t kSplitKeys = 128;
#ifndef HEARTH_ATTN_MAX_SCRATCH_BYTES  // a test on the host sets it small, to run several launches
#define HEARTH_ATTN_MAX_SCRATCH_BYTES (size_t{64} << 20)
#endif
constexpr size_t kMaxScratchBytes = HEARTH_ATTN_MAX_SCRATCH_BYTES;

struct AttnParams {
  const void* q;
  size_t q_stride;
  const void* k;
  size_t k_stride;
  const void* v;
  size_t v_stride;
  const int32_t* positions;
  const int32_t* slots;
  void* dst;
  size_t dst_stride;
  float* part;  // split partials (layout above); null when unsplit
  int32_t n_q, n_kv, n_heads, group, head_dim, window;
  float scale, softcap;
  int32_t n_split;  // split s of a row covers keys [(jb / L + s) L, (jb / L + s + 1) L), L = kSplitKeys
};

// Keys [*b, *e) of query row t in split `split` (*b >= *e: none). The last split takes
// everything past the others, so a row's range is covered even if the host's max_position
// (which sized n_split) were too small.
__device__ __forceinline__ void key_range(const AttnParams& p, int64_t t, int split, int64_t* b, int64_t* e) {
  const int64_t pos = p.positions[t];
  int64_t jb = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  int64_t je = std::min<int64_t>(p.n_kv, pos + 1);
  if (p.part != nullptr) {
    const int64_t sb = (jb / kSplitKeys + split) * kSplitKeys;
    je = split == p.n_split - 1 ? je : std::min(je, sb + kSplitKeys);
    jb = std::max(jb, sb);
  }
  *b = jb;
  *e = je;
}

// One round of warp_reduce_scatter on the first kCount values of v: keep one half, send
// the other to the partner lane across kOff, add what it sent.
template <int kSize, int kCount, int kOff>
__device__ __forceinline__ void reduce_scatter_round(float (&v)[kSize], int lane) {
  if constexpr (kCount > 1) {
    constexpr int kHalf = kCount / 2;
    const bool upper = (lane & kOff) != 0;
#pragma unroll
    for (int k = 0; k < kHalf; ++k) {
      const float send = upper ? v[k] : v[k + kHalf];
      const float keep = upper ? v[k + kHalf] : v[k];
      v[k] = keep + __shfl_xor_sync(kFullMask, send, kOff);
    }
    reduce_scatter_round<kSize, kHalf, kOff / 2>(v, lane);
  }
}

// Sums kN values (a power of two <= 32) over the warp at once: v[k] of every lane adds up to
// key k's total, which ends in lanes k * (32 / kN) .. (k + 1) * (32 / kN) - 1 (all equal).
// Each round halves the values a lane holds: the lane keeps one half, its partner across
// `off` the other, and each adds what the other sent; then a plain butterfly over the lanes
// that are left. kN - 1 + log2(32 / kN) shuffles instead of 5 kN; a fixed order per lane.
template <int kN>
__device__ __forceinline__ float warp_reduce_scatter(float (&v)[kN], int lane) {
  static_assert(kN >= 1 && kN <= kWarp && (kN & (kN - 1)) == 0, "kN must be a power of two <= 32");
  reduce_scatter_round<kN, kN, kWarp / 2>(v, lane);
  float s = v[0];
#pragma unroll
  for (int off = kWarp / 2 / kN; off > 0; off >>= 1) s += __shfl_xor_sync(kFullMask, s, off);
  return s;
}

// Stages elements [col, col + hd) of the cache rows of a tile's n keys (slots in slot_sh) as
// f32 rows of kHdp in sh, zeros past hd and past n. A thread's kStage elements go kChunk at a
// time, all loads of a chunk before its stores: enough loads in flight per thread to cover
// memory's latency with several blocks per SM, few enough registers to fit them.
template <Kv kKv, int kHdp, int kStage>
__device__ __forceinline__ void stage_tile(float* sh, const char* base, size_t stride, const int32_t* slot_sh,
                                           int64_t col, int hd, int n, int tid) {
  constexpr int kChunk = kKv == Kv::Q8_0 ? 8 : 16;
  constexpr int kChunks = kStage > kChunk ? kStage / kChunk : 1;
  constexpr int kPer = kStage / kChunks;
  static_assert(kPer * kChunks == kStage);
  // Not unrolled: the compiler would hoist every chunk's loads above the first stores, and
  // the registers that takes (twice as many a thread) halve the blocks an SM holds.
#pragma unroll 1
  for (int c = 0; c < kChunks; ++c) {
    float x[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int idx = tid + (c * kPer + u) * kAttnThreads;
      const int k = idx / kHdp, d = idx % kHdp;
      x[u] = d < hd && k < n ? kv_element<kKv>(base + static_cast<size_t>(slot_sh[k]) * stride, col + d) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) sh[tid + (c * kPer + u) * kAttnThreads] = x[u];
  }
}

// One warp's share of a staged tile of keys [j0, j0 + kTile): the keys of its range
// [my_b, my_e) among them, folded into the running maximum m, sum l and accumulator acc.
template <int kNpl, int kTile, int kHdp>
__device__ __forceinline__ void attend_tile(const AttnParams& p, const float* k_sh, const float* v_sh,
                                            const float (&q)[kNpl], float (&acc)[kNpl], float& m, float& l, int64_t j0,
                                            int64_t my_b, int64_t my_e, int lane) {
  float dot[kTile];
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    dot[k] = 0.0f;
#pragma unroll
    for (int i = 0; i < kNpl; ++i) dot[k] += q[i] * k_sh[k * kHdp + lane + kWarp * i];
  }
  // Key k's dot product to lane k.
  const float total = warp_reduce_scatter<kTile>(dot, lane);
  float s = __shfl_sync(kFullMask, total, (lane % kTile) * (kWarp / kTile));
  const int64_t j = j0 + lane;
  const bool valid = lane < kTile && j >= my_b && j < my_e;
  if (valid) {
    s = p.scale * s;
    if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  } else {
    s = -INFINITY;
  }
  const float m_new = fmaxf(m, warp_max(s));
  // m_new is -inf only when every score so far is -inf: nothing to weigh yet.
  const bool any = m_new > -INFINITY;
  const float alpha = any ? expf(m - m_new) : 1.0f;  // 0 on the first tile (m = -inf)
  const float w = valid && any ? expf(s - m_new) : 0.0f;
  l = l * alpha + warp_sum(w);
#pragma unroll
  for (int i = 0; i < kNpl; ++i) acc[i] *= alpha;
  const unsigned valid_mask = __ballot_sync(kFullMask, valid);
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    if (!((valid_mask >> k) & 1u)) continue;  // uniform: keys outside this pair's range
    const float wk = __shfl_sync(kFullMask, w, k);
#pragma unroll
    for (int i = 0; i < kNpl; ++i) acc[i] += wk * v_sh[k * kHdp + lane + kWarp * i];
  }
  m = m_new;
}

// kNpl: query / output elements per lane (head_dim <= kHdp = 32 * kNpl, the length of a
// staged row; elements past head_dim are zeros). kTile keys per tile keep the two staged
// tiles at 32 KiB: 2 * kTile * kHdp floats.
template <Kv kKv, int kNpl>
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(const AttnParams p) {
  constexpr int kHdp = kWarp * kNpl;
  constexpr int kTile = kNpl >= 16 ? 8 : kNpl >= 8 ? 16 : 32;
  constexpr int kStage = kTile * kHdp / kAttnThreads;  // staged elements per thread, per tensor
  static_assert(kStage * kAttnThreads == kTile * kHdp);
  __shared__ float k_sh[kTile * kHdp];
  __shared__ float v_sh[kTile * kHdp];
  __shared__ int32_t slot_sh[kTile];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp, warp = tid / kWarp;
  const int kvh = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int hd = p.head_dim;
  const int64_t n_pairs = static_cast<int64_t>(p.n_q) * p.group;
  const int64_t pair0 = static_cast<int64_t>(blockIdx.x) * kAttnWarps;

  // Every thread works out all 4 pairs' ranges, so the union and the "does any warp need
  // this tile" test are the same in every thread without a barrier. Warps without a pair
  // (past the last) still stage tiles and meet every barrier.
  int64_t rb[kAttnWarps], re[kAttnWarps];
  int64_t blk_b = 0, blk_e = 0;
  bool blk_any = false;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) {
    rb[w] = 0;
    re[w] = 0;
    if (pair0 + w < n_pairs) key_range(p, (pair0 + w) / p.group, split, &rb[w], &re[w]);
    if (rb[w] < re[w]) {
      blk_b = blk_any ? std::min(blk_b, rb[w]) : rb[w];
      blk_e = blk_any ? std::max(blk_e, re[w]) : re[w];
      blk_any = true;
    }
  }
  const bool active = pair0 + warp < n_pairs;
  const int64_t t = active ? (pair0 + warp) / p.group : 0;
  const int h = kvh * p.group + static_cast<int>(active ? (pair0 + warp) % p.group : 0);
  int64_t my_b = 0, my_e = 0;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w)
    if (w == warp) {
      my_b = rb[w];
      my_e = re[w];
    }

  float q[kNpl], acc[kNpl];
  const float* q_row = row_ptr<float>(p.q, t, p.q_stride) + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int i = 0; i < kNpl; ++i) {
    const int d = lane + kWarp * i;
    q[i] = active && d < hd ? q_row[d] : 0.0f;
    acc[i] = 0.0f;
  }
  const int64_t col = static_cast<int64_t>(kvh) * hd;  // this head's first element in a cache row
  const char* k_base = static_cast<const char*>(p.k);
  const char* v_base = static_cast<const char*>(p.v);

  // The first tile at or after `from` (a multiple of kTile: the tile grid is absolute) that a
  // pair of the block needs, or blk_e: the tile holding the earliest key >= from of any
  // range. A gap between the pairs' ranges (scattered rows) is skipped.
  const auto next_tile = [&](int64_t from) {
    int64_t x = blk_e;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w)
      if (rb[w] < re[w] && re[w] > from) x = std::min(x, std::max(from, rb[w]));
    return x >= blk_e ? blk_e : x / kTile * kTile;
  };
  // Thread tid < kTile's slot for the tile at j.
  const auto tile_slot = [&](int64_t j) { return tid < kTile && j + tid < blk_e ? p.slots[j + tid] : 0; };

  float m = -INFINITY, l = 0.0f;
  int64_t j0 = blk_any ? next_tile(blk_b / kTile * kTile) : blk_e;
  int32_t next_slot = tile_slot(j0);
  while (j0 < blk_e) {
    const int64_t j1 = std::min<int64_t>(j0 + kTile, blk_e);
    __syncthreads();  // every warp is done with the previous tile's shared rows
    if (tid < kTile) slot_sh[tid] = next_slot;
    __syncthreads();
    const int64_t j_next = next_tile(j0 + kTile);
    next_slot = tile_slot(j_next);  // in flight while this tile is staged and used
    stage_tile<kKv, kHdp, kStage>(k_sh, k_base, p.k_stride, slot_sh, col, hd, static_cast<int>(j1 - j0), tid);
    stage_tile<kKv, kHdp, kStage>(v_sh, v_base, p.v_stride, slot_sh, col, hd, static_cast<int>(j1 - j0), tid);
    __syncthreads();
    if (active && my_b < j1 && my_e > j0 && my_b < my_e)
      attend_tile<kNpl, kTile, kHdp>(p, k_sh, v_sh, q, acc, m, l, j0, my_b, my_e, lane);
    j0 = j_next;
  }
  if (!active) return;

  if (p.part == nullptr) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // empty range: zeros
    float* out = row_ptr<float>(p.dst, t, p.dst_stride) + static_cast<int64_t>(h) * hd;
#pragma unroll
    for (int i = 0; i < kNpl; ++i) {
      const int d = lane + kWarp * i;
      if (d < hd) out[d] = acc[i] * inv;
    }
    return;
  }
  float* rec = p.part + ((t * p.n_heads + h) * static_cast<int64_t>(p.n_split) + split) * (hd + 2);
  if (lane == 0) {
    rec[0] = m;
    rec[1] = l;
  }
#pragma unroll
  for (int i = 0; i < kNpl; ++i) {
    const int d = lane + kWarp * i;
    if (d < hd) rec[2 + d] = acc[i];
  }
}

// Grid: x = (row, head) pair = record group t * n_heads + h, y = 32 output elements
// [32 y, 32 y + 32). Warp w of the block sums the splits s = w, w + kCombineWarps, ... (lane =
// element), so many splits' loads are in flight at once; the warps' sums are then added in
// order. Every warp works out M = max m_s and S = sum l_s e^(m_s - M) itself (the same
// operations in the same order, so the same values) rather than wait on one another.
constexpr int kCombineWarps = 16;

__global__ void __launch_bounds__(kCombineWarps* kWarp)
    attention_combine_kernel(const float* part, int32_t n_heads, int32_t head_dim, int32_t n_split, void* dst,
                             size_t dst_stride) {
  __shared__ float sum_sh[kCombineWarps][kWarp];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t pair = blockIdx.x;
  const int d = static_cast<int>(blockIdx.y) * kWarp + lane;
  const int64_t rec_len = head_dim + 2;
  const float* base = part + pair * n_split * rec_len;

  float mx = -INFINITY;
  for (int s = lane; s < n_split; s += kWarp) mx = fmaxf(mx, base[s * rec_len]);
  mx = warp_max(mx);
  float total = 0.0f;
  for (int s = lane; s < n_split; s += kWarp) {
    const float ms = base[s * rec_len];
    if (ms > -INFINITY) total += base[s * rec_len + 1] * expf(ms - mx);  // a split with no key counts 0
  }
  total = warp_sum(total);

  // A split with no key has m = -inf and an accumulator of zeros: weight 0, nothing added,
  // so the loads need no branch and can all be in flight.
  float a = 0.0f;
#pragma unroll 4
  for (int s = warp; s < n_split; s += kCombineWarps) {
    const float ms = base[s * rec_len];
    const float x = d < head_dim ? base[s * rec_len + 2 + d] : 0.0f;
    a += x * (ms > -INFINITY ? expf(ms - mx) : 0.0f);
  }
  sum_sh[warp][lane] = a;
  __syncthreads();
  if (warp != 0 || d >= head_dim) return;
  a = 0.0f;
  for (int w = 0; w < kCombineWarps; ++w) a += sum_sh[w][lane];
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  row_ptr<float>(dst, pair / n_heads, dst_stride)[(pair % n_heads) * head_dim + d] = a * inv;
}

int64_t div_up(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct SplitPlan {
  int32_t n_split = 1;     // 1: unsplit
  int64_t rows_per_launch = 0;  // query rows per launch (all, unsplit)
};

// The split of a's key ranges: a function of the arguments only, shared by
// attention_scratch_bytes and launch_attention. A pass splits when its longest range reaches
// past key kSplitKeys (see the top of the file: a row's result is then the same in every
// pass); every row's range is at most `span` keys long (causality, the cache length, the
// window), so it touches at most span / L + 1 absolute parts.
SplitPlan plan_split(const AttentionArgs& a) {
  SplitPlan plan;
  plan.rows_per_launch = a.q.rows;
  if (a.q.rows <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.n_kv <= 0) return plan;
  const int64_t reach = std::min<int64_t>(a.n_kv, static_cast<int64_t>(a.max_position) + 1);
  if (reach <= kSplitKeys) return plan;
  int64_t span = reach;
  if (a.window > 0) span = std::min<int64_t>(span, a.window);
  plan.n_split = static_cast<int32_t>(std::min(div_up(span, kSplitKeys) + 1, div_up(reach, kSplitKeys)));
  const size_t row_bytes =
      static_cast<size_t>(a.n_heads) * static_cast<size_t>(plan.n_split) * (static_cast<size_t>(a.head_dim) + 2) * 4;
  plan.rows_per_launch = std::clamp<int64_t>(static_cast<int64_t>(kMaxScratchBytes / row_bytes), 1, a.q.rows);
  return plan;
}

template <Kv kKv, int kNpl>
void launch_attention_npl(const AttnParams& p, int32_t n_kv_heads, cudaStream_t stream) {
  const dim3 grid(div_up_u(static_cast<int64_t>(p.n_q) * p.group, kAttnWarps), static_cast<unsigned>(n_kv_heads),
                  static_cast<unsigned>(p.n_split));
  HEARTH_LAUNCH(grid, kAttnThreads, stream, attention_kernel<kKv, kNpl>)(p);
}

template <Kv kKv>
void launch_attention_kv(const AttnParams& p, int32_t n_kv_heads, cudaStream_t stream) {
  if (p.head_dim <= 32) return launch_attention_npl<kKv, 1>(p, n_kv_heads, stream);
  if (p.head_dim <= 64) return launch_attention_npl<kKv, 2>(p, n_kv_heads, stream);
  if (p.head_dim <= 128) return launch_attention_npl<kKv, 4>(p, n_kv_heads, stream);
  if (p.head_dim <= 256) return launch_attention_npl<kKv, 8>(p, n_kv_heads, stream);
  launch_attention_npl<kKv, 16>(p, n_kv_heads, stream);
}

}  // namespace

void launch_store_kv(const DevRows& k, const DevRows& v, const int32_t* slots, DType kv_type, const DevRows& k_cache,
                     const DevRows& v_cache, cudaStream_t stream) {
  const int64_t n_tok = k.rows, width = k.ne0;
  if (n_tok <= 0 || width <= 0) return;
  const unsigned grid_y = static_cast<unsigned>(std::min(n_tok, kMaxGridY));
  switch (kv_type) {
    case DType::F32:
      HEARTH_LAUNCH(dim3(div_up_u(width, kStoreBlock), grid_y, 2), kStoreBlock, stream, store_kv_plain_kernel<Kv::F32>)(
          k.ptr, k.stride, v.ptr, v.stride, slots, n_tok, width, k_cache.ptr, k_cache.stride, v_cache.ptr,
          v_cache.stride);
      break;
    case DType::F16:
      HEARTH_LAUNCH(dim3(div_up_u(width, kStoreBlock), grid_y, 2), kStoreBlock, stream, store_kv_plain_kernel<Kv::F16>)(
          k.ptr, k.stride, v.ptr, v.stride, slots, n_tok, width, k_cache.ptr, k_cache.stride, v_cache.ptr,
          v_cache.stride);
      break;
    case DType::Q8_0:
      if (width < kQ8Block) return;
      HEARTH_LAUNCH(dim3(div_up_u((width / kQ8Block) * kWarp, kStoreBlock), grid_y, 2), kStoreBlock, stream, store_kv_q8_0_kernel)(k.ptr, k.stride, v.ptr, v.stride, slots, n_tok, width, k_cache.ptr,
                                       k_cache.stride, v_cache.ptr, v_cache.stride);
      break;
    default:
      break;  // not a KV type (attention_supported says so)
  }
}

size_t attention_scratch_bytes(const AttentionArgs& a) {
  const SplitPlan plan = plan_split(a);
  if (plan.n_split <= 1) return 0;
  return static_cast<size_t>(plan.rows_per_launch) * static_cast<size_t>(a.n_heads) *
         static_cast<size_t>(plan.n_split) * (static_cast<size_t>(a.head_dim) + 2) * sizeof(float);
}

bool attention_supported(int32_t head_dim, DType kv_type) {
  return head_dim > 0 && head_dim <= kMaxHeadDim &&
         (kv_type == DType::F32 || kv_type == DType::F16 || kv_type == DType::Q8_0);
}

void launch_attention(const AttentionArgs& a, void* scratch, cudaStream_t stream) {
  if (a.q.rows <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.head_dim <= 0) return;
  if (!attention_supported(a.head_dim, a.kv_type)) return;
  SplitPlan plan = plan_split(a);
  // No scratch given: unsplit, slower, and a row's rounding may then differ from a split pass.
  if (scratch == nullptr) plan = SplitPlan{1, a.q.rows};
  AttnParams p{};
  p.k = a.k_cache.ptr;
  p.k_stride = a.k_cache.stride;
  p.v = a.v_cache.ptr;
  p.v_stride = a.v_cache.stride;
  p.slots = a.slots;
  p.part = plan.n_split > 1 ? static_cast<float*>(scratch) : nullptr;
  p.n_kv = a.n_kv;
  p.n_heads = a.n_heads;
  p.group = a.n_heads / a.n_kv_heads;
  p.head_dim = a.head_dim;
  p.window = a.window;
  p.scale = a.scale;
  p.softcap = a.softcap;
  p.n_split = plan.n_split;
  p.q_stride = a.q.stride;
  p.dst_stride = a.dst.stride;
  // Rows [r0, r0 + n) per launch: the partials of a launch fit the scratch.
  for (int64_t r0 = 0; r0 < a.q.rows; r0 += plan.rows_per_launch) {
    const int64_t n = std::min(plan.rows_per_launch, a.q.rows - r0);
    p.q = static_cast<const char*>(a.q.ptr) + static_cast<size_t>(r0) * a.q.stride;
    p.dst = static_cast<char*>(a.dst.ptr) + static_cast<size_t>(r0) * a.dst.stride;
    p.positions = a.positions + r0;
    p.n_q = static_cast<int32_t>(n);
    switch (a.kv_type) {
      case DType::F32:
        launch_attention_kv<Kv::F32>(p, a.n_kv_heads, stream);
        break;
      case DType::F16:
        launch_attention_kv<Kv::F16>(p, a.n_kv_heads, stream);
        break;
      default:
        launch_attention_kv<Kv::Q8_0>(p, a.n_kv_heads, stream);
        break;
    }
    if (plan.n_split > 1) {
      const int64_t n_pairs = n * a.n_heads;
      const dim3 grid(static_cast<unsigned>(n_pairs), div_up_u(a.head_dim, kWarp));
      HEARTH_LAUNCH(grid, kCombineWarps * kWarp, stream, attention_combine_kernel)(
          static_cast<const float*>(scratch), a.n_heads, a.head_dim, plan.n_split, p.dst, a.dst.stride);
    }
  }
}

}  // namespace hearth::cuda
