#version 450
// Groups a MatMulExperts op's (token, rank) pairs by expert for the batched matmul_experts
// (TT > 1), so each expert's weight rows are read once per tile of TT of its pairs instead
// of once per pair. One workgroup. ids: I32 [rows = n_tok, i0 = k] at binding 3 (src2's
// slot); i1 = n_expert; u0 = TT. Buckets b = 0 .. n_expert, the last one for ids outside
// [0, n_expert). dst (uint, E = n_expert + 1):
//   [0, E]            off[b]: the first of bucket b's pairs in the list (off[E] = n_pairs)
//   [E + 1, 2E + 1]   tile[b]: bucket b's first tile (tile[E] = the number of tiles)
//   [2E + 2, + n_pairs) the pairs t * k + j, by bucket, in increasing order within one
// so a tile's pairs, and the order of everything, depend only on the ids.
#include "common.glsl"

layout(std430, binding = 0) buffer Dst { uint grp[]; };
layout(std430, binding = 3) readonly buffer Ids { int ids[]; };

uint bucket(uint p, uint k, uint n_expert) {
  const int e = ids[pc.s2_off + (p / k) * pc.s2_stride + p % k];
  return e >= 0 && e < int(n_expert) ? uint(e) : n_expert;
}

void main() {
  const uint tid = gl_LocalInvocationID.x, k = uint(pc.i0), n_expert = uint(pc.i1), tt = pc.u0;
  const uint n_pairs = pc.rows * k, E = n_expert + 1u, base = pc.d_off;
  const uint off = base, tile = base + E + 1u, list = base + 2u * E + 2u;
  // Counts into off[b + 1] (each bucket by one invocation), then prefix sums by one.
  for (uint b = tid; b < E; b += WG) {
    uint c = 0u;
    for (uint p = 0u; p < n_pairs; ++p) c += bucket(p, k, n_expert) == b ? 1u : 0u;
    grp[off + b + 1u] = c;
  }
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) {
    grp[off] = 0u;
    grp[tile] = 0u;
    for (uint b = 0u; b < E; ++b) {
      const uint c = grp[off + b + 1u];
      grp[tile + b + 1u] = grp[tile + b] + (c + tt - 1u) / tt;
      grp[off + b + 1u] = grp[off + b] + c;
    }
  }
  memoryBarrierBuffer();
  barrier();
  for (uint b = tid; b < E; b += WG) {
    uint at = list + grp[off + b];
    for (uint p = 0u; p < n_pairs; ++p)
      if (bucket(p, k, n_expert) == b) grp[at++] = p;
  }
}
