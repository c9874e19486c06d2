// The gemm driver shared by the SIMD translation units: it walks R weight rows x T tokens
// per tile so each weight block is loaded (and unpacked) once per tile, and keeps one
// accumulator per (row, token). A kernel K defines how one block pair is multiplied into
// an accumulator; the driver applies exactly the same sequence of K operations to every
// output whatever the tile shape, which is what makes gemm bitwise equal to vec_dot.
//
// Kernel interface (all static, force-inlined):
//   kBlockElems, kWBlockBytes, kABlockBytes  block geometry of weight / activation rows
//   kTail                                    rows may end in a partial block (plain types)
//   Acc zero();  float finish(const Acc&)
//   void load_w(W&, const uint8_t* block);   void load_a(A&, const uint8_t* block)
//   void mac(Acc&, const W&, const A&)
//   if kTail: load_w_tail(W&, p, n_left), load_a_tail(A&, p, n_left) (zero-padded)
// Include only from a TU compiled with the matching ISA flags, inside an anonymous namespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backends/cpu/vec_dot_kernels.h"

#define HEARTH_INLINE inline __attribute__((always_inline))
#ifndef HEARTH_PREFETCH_TILES
#define HEARTH_PREFETCH_TILES 4
#endif

namespace hearth::cpu::detail {

// Which hint the weight-stream prefetches below use, chosen once per process. The
// non-temporal one (prefetchnta) was the faster on AMD Zen 5 (8 KB ahead, Qwen2.5-0.5B
// decode); on an Intel Xeon (Sapphire Rapids family, KVM guest) prefetchnta reads at a
// third of plain loads' rate and made decode half as fast as prefetcht0 (Gemma 3 270M tg128,
// 2.0-2.1x at 1 and 2 threads; docs/engine.md). HEARTH_PREFETCH=nta|t0 overrides, to
// measure another machine.
inline const bool kPrefetchT0 = [] {
  if (const char* env = std::getenv("HEARTH_PREFETCH"); env != nullptr && *env != '\0')
    return std::strcmp(env, "t0") == 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("intel") != 0;
#else
  return false;
#endif
}();

// A prefetch of the line at p (prefetchnta or prefetcht0 on x86, kPrefetchT0) that is
// always emitted: GCC 12 silently dropped every __builtin_prefetch of the Q4_K and Q6_K
// repacked decode loops (objdump showed none; why was not pinned down), which left
// Q6_K decode at 9.5 GB/s against 22 GB/s with the prefetches in (bench_quants, 1 thread).
HEARTH_INLINE void prefetch_weights(const void* p) {
#if defined(__x86_64__)
  if (kPrefetchT0)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
  else
    asm volatile("prefetchnta %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 0);
#endif
}

namespace tile {

// Decode streams each weight row once from DRAM. R rows advancing together look like R
// short interleaved streams that the hardware prefetcher does not pick up, so when kPrefetch
// we prefetch the rows kPrefetchTiles tiles ahead ourselves, R blocks' worth of bytes per
// block step (rows are usually contiguous, so that covers the tile; if not, it is only a hint).
constexpr int64_t kPrefetchTiles = HEARTH_PREFETCH_TILES;

template <class K, int R, int T, bool kPrefetch = false>
HEARTH_INLINE void run_tile(const GemmArgs& g, int64_t r, int64_t t) {
  typename K::Acc acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) acc[i][j] = K::zero();
  const int64_t nb = g.n / K::kBlockElems;
  const uint8_t* wp[R];
  const uint8_t* ap[T];
  for (int i = 0; i < R; ++i) wp[i] = g.w + (r + i) * g.ws;
  for (int j = 0; j < T; ++j) ap[j] = g.a + (t + j) * g.as;
  const uint8_t* ahead = wp[0] + kPrefetchTiles * R * static_cast<int64_t>(g.ws);
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kPrefetch) {
      for (size_t off = 0; off < R * K::kWBlockBytes; off += 64)
        prefetch_weights(ahead + b * R * static_cast<int64_t>(K::kWBlockBytes) + off);
    }
    typename K::W w[R];
    typename K::A a[T];
    for (int i = 0; i < R; ++i) K::load_w(w[i], wp[i] + b * K::kWBlockBytes);
    for (int j = 0; j < T; ++j) K::load_a(a[j], ap[j] + b * K::kABlockBytes);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) K::mac(acc[i][j], w[i], a[j]);
  }
  if constexpr (K::kTail) {
    const int64_t left = g.n - nb * K::kBlockElems;
    if (left > 0) {
      typename K::W w[R];
      typename K::A a[T];
      for (int i = 0; i < R; ++i) K::load_w_tail(w[i], wp[i] + nb * K::kWBlockBytes, left);
      for (int j = 0; j < T; ++j) K::load_a_tail(a[j], ap[j] + nb * K::kABlockBytes, left);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) K::mac(acc[i][j], w[i], a[j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) g.y[static_cast<size_t>(t + j) * g.ys + (r + i)] = K::finish(acc[i][j]);
}

// A tile whose weights were unpacked beforehand (wb: R entries per block, block-major, then
// the tail block if any). Same K operations, in the same order, as run_tile.
template <class K, int R, int T>
HEARTH_INLINE void run_tile_cached(const GemmArgs& g, const typename K::W* wb, int64_t r, int64_t t) {
  typename K::Acc acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) acc[i][j] = K::zero();
  const int64_t nb = g.n / K::kBlockElems;
  const uint8_t* ap[T];
  for (int j = 0; j < T; ++j) ap[j] = g.a + (t + j) * g.as;
  for (int64_t b = 0; b < nb; ++b) {
    typename K::A a[T];
    for (int j = 0; j < T; ++j) K::load_a(a[j], ap[j] + b * K::kABlockBytes);
    const typename K::W* w = wb + b * R;
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) K::mac(acc[i][j], w[i], a[j]);
  }
  if constexpr (K::kTail) {
    const int64_t left = g.n - nb * K::kBlockElems;
    if (left > 0) {
      typename K::A a[T];
      for (int j = 0; j < T; ++j) K::load_a_tail(a[j], ap[j] + nb * K::kABlockBytes, left);
      const typename K::W* w = wb + nb * R;
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) K::mac(acc[i][j], w[i], a[j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) g.y[static_cast<size_t>(t + j) * g.ys + (r + i)] = K::finish(acc[i][j]);
}

// Unpacks rows [r, r + R) into wb (layout of run_tile_cached).
template <class K, int R>
HEARTH_INLINE void unpack_rows(const GemmArgs& g, typename K::W* wb, int64_t r) {
  const int64_t nb = g.n / K::kBlockElems;
  for (int64_t b = 0; b < nb; ++b)
    for (int i = 0; i < R; ++i) K::load_w(wb[b * R + i], g.w + (r + i) * g.ws + b * K::kWBlockBytes);
  if constexpr (K::kTail) {
    const int64_t left = g.n - nb * K::kBlockElems;
    if (left > 0)
      for (int i = 0; i < R; ++i) K::load_w_tail(wb[nb * R + i], g.w + (r + i) * g.ws + nb * K::kWBlockBytes, left);
  }
}

// Tokens [t0, t1) against rows [r0, r1): R x T tiles, then leftovers one row / one token at
// a time (the same per-output arithmetic). With wb (room for R * (n / kBlockElems + 1)
// weight blocks), each R-row group is unpacked once and reused for every token tile.
template <class K, int R, int T, bool kPrefetch = false>
void sweep(const GemmArgs& g, int64_t t0, int64_t t1, typename K::W* wb = nullptr) {
  int64_t r = g.r0;
  for (; r + R <= g.r1; r += R) {
    int64_t t = t0;
    if (wb != nullptr) {
      unpack_rows<K, R>(g, wb, r);
      for (; t + T <= t1; t += T) run_tile_cached<K, R, T>(g, wb, r, t);
      for (; t < t1; ++t) run_tile_cached<K, R, 1>(g, wb, r, t);
      continue;
    }
    for (; t + T <= t1; t += T) run_tile<K, R, T, kPrefetch>(g, r, t);
    for (; t < t1; ++t) run_tile<K, R, 1>(g, r, t);
  }
  for (; r < g.r1; ++r) {
    int64_t t = t0;
    for (; t + T <= t1; t += T) run_tile<K, 1, T>(g, r, t);
    for (; t < t1; ++t) run_tile<K, 1, 1>(g, r, t);
  }
}

// Tokens are taken kTokenChunk at a time so their activation rows stay in L2 while every
// weight row passes. A single token (decode) uses taller tiles of kDecodeRows rows; a few
// tokens (continuous batching's decode steps: one row per running sequence) go through
// the same prefetching sweep with every token of the batch in one tile (2, 3) or in
// T-token tiles, so each weight row is streamed from memory once per step, not once per
// token, and without the unpack cache (which would walk R rows without prefetching).
template <class K, int R, int T, int kDecodeRows>
void gemm(const GemmArgs& g) {
  constexpr int64_t kTokenChunk = 64;
  constexpr int64_t kSmallBatch = 16;
  switch (g.n_tok) {
    case 1:
      sweep<K, kDecodeRows, 1, true>(g, 0, 1);
      return;
    case 2:
      sweep<K, kDecodeRows, 2, true>(g, 0, 2);
      return;
    case 3:
      sweep<K, kDecodeRows, 3, true>(g, 0, 3);
      return;
    default:
      break;
  }
  if (g.n_tok <= kSmallBatch) {
    sweep<K, kDecodeRows, T, true>(g, 0, g.n_tok);
    return;
  }
  const int64_t n_wb = R * (g.n / K::kBlockElems + 1);
  std::unique_ptr<typename K::W[]> wb(new typename K::W[static_cast<size_t>(n_wb)]);
  for (int64_t t = 0; t < g.n_tok; t += kTokenChunk)
    sweep<K, R, T>(g, t, t + kTokenChunk < g.n_tok ? t + kTokenChunk : g.n_tok, wb.get());
}

}  // namespace tile
}  // namespace hearth::cpu::detail
