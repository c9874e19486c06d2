// MatMul: dst[t, u0 + o] = sum_i W[o, i] * x[t, i], f32 accumulation, the weights
// dequantized in the shader (the activations stay f32). Included by matmul.comp and, with
// EXPERTS defined, by matmul_experts.comp (MatMulExperts: see there).
//
// A workgroup computes R = WG / L output rows for TT tokens: L lanes per row (u1, a power
// of two the host picks per device: 1 on CPU devices, up to 32 on GPUs; constant 2) take the row's
// 32-element chunks c = lane, lane + L, ...; each chunk is dequantized once and dotted
// with TT token rows, and the L partial sums are added in a shared-memory tree. TT
// (specialization constant 1) is 1 for a single token (matrix-vector) and 8 for batches
// (each weight chunk reused for 8 tokens). A token's reduction order depends only on L and
// n_in, never on the number of tokens.
// Grid: x = groups of R rows of this dispatch's weight window, y = token tiles.
// (The including .comp file includes common.glsl first.)

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
#ifdef EXPERTS
layout(std430, binding = 3) readonly buffer Ids { int ids[]; };
#endif
#include "dequant.glsl"

layout(constant_id = 1) const uint TT = 8;
// Lanes per row (specialization constant 2, so that with L = 1 the chunk index is uniform
// across the workgroup and the activation loads are too).
layout(constant_id = 2) const uint L = 1;
shared float part_sh[TT * WG];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % L;
  const uint o = gl_WorkGroupID.x * (WG / L) + tid / L;
  const uint n_in = pc.ne0;
#ifdef EXPERTS
  // One (token, rank) pair p per workgroup row (TT = 1): expert e = ids[p / k, p % k]
  // (i0 = k, i1 = n_expert); this dispatch binds the weights of experts [u0, u1) and
  // computes only the pairs whose expert is there; the one with u0 = 0 also writes the
  // zeros of pairs whose id is out of range. The same for the whole workgroup, so the
  // early return leaves no barrier half-passed.
  const uint p = gl_WorkGroupID.y, kk = uint(pc.i0);
  const int e = ids[pc.s2_off + (p / kk) * pc.s2_stride + p % kk];
  const bool known = e >= 0 && e < pc.i1;
  const bool mine = known && uint(e) >= pc.u0 && uint(e) < pc.u1;
  if (!mine && (known || pc.u0 != 0u)) return;
  const uint x_row = pc.i2 != 0 ? p : p / kk;  // i2 = op.i1: a row of input per pair
  const uint d_row = p, d_col = o, nt = 1u;
  const bool live = mine && o < pc.n_ia;  // n_ia: n_out
  const uint row = pc.s0_off + ((mine ? uint(e) - pc.u0 : 0u) * pc.n_ia + o) * pc.s0_stride;
#else
  const uint t0 = gl_WorkGroupID.y * TT;
  const uint x_row = t0, d_row = t0, d_col = pc.u0 + o;
  const uint nt = min(TT, pc.rows - t0);
  const bool live = o < pc.n_ia;  // n_ia: rows in this dispatch
  const uint row = pc.s0_off + o * pc.s0_stride;
#endif

  float acc[TT];
  [[unroll]] for (uint t = 0u; t < TT; ++t) acc[t] = 0.0;
  const uint n_chunks = live ? (n_in + 31u) / 32u : 0u;
  for (uint c = lane; c < n_chunks; c += L) {
    const uint n = min(32u, n_in - c * 32u);
    vec4 v[8];
    dequant_chunk(row, c, n, v);
    [[unroll]] for (uint t = 0u; t < TT; ++t) {
      if (t < nt) {
        const uint xb = pc.s1_off + (x_row + t) * pc.s1_stride + c * 32u;
        float s = 0.0;
        if (n == 32u) {
          [[unroll]] for (uint k = 0u; k < 8u; ++k)
            s += dot(v[k], vec4(x[xb + 4u * k], x[xb + 4u * k + 1u], x[xb + 4u * k + 2u], x[xb + 4u * k + 3u]));
        } else {
          for (uint k = 0u; k < n; ++k) s += v[k / 4u][k % 4u] * x[xb + k];
        }
        acc[t] += s;
      }
    }
  }

  if (L > 1u) {
    [[unroll]] for (uint t = 0u; t < TT; ++t) part_sh[t * WG + tid] = acc[t];
    barrier();
    for (uint s = L / 2u; s > 0u; s >>= 1) {
      if (lane < s) {
        [[unroll]] for (uint t = 0u; t < TT; ++t) part_sh[t * WG + tid] += part_sh[t * WG + tid + s];
      }
      barrier();
    }
    [[unroll]] for (uint t = 0u; t < TT; ++t) acc[t] = part_sh[t * WG + tid];
  }
  if (o < pc.n_ia && lane == 0u) {  // acc is 0 where !live: an unknown expert's zeros
    [[unroll]] for (uint t = 0u; t < TT; ++t)
      if (t < nt) d[pc.d_off + (d_row + t) * pc.d_stride + d_col] = acc[t];
  }
}
