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
layout(std430, binding = 4) readonly buffer Grp { uint grp[]; };
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
  // The pairs p = t * k + j of this workgroup (i0 = k, i1 = n_expert), all of one expert b
  // (b = n_expert: an id outside the experts; their rows are written as zeros). TT = 1: pair
  // gl_WorkGroupID.y, its expert read from ids; TT > 1: tile gl_WorkGroupID.y of the
  // grouping moe_group.comp wrote (binding 4, src3's slot). This dispatch binds the weights
  // of experts [u0, u1) and computes only the pairs of those; the one with u0 = 0 also
  // writes the zeros. The same for the whole workgroup, so the early returns leave no
  // barrier half-passed.
  const uint kk = uint(pc.i0), n_expert = uint(pc.i1);
  uint pr[TT], xr[TT], b, nt;
  if (TT == 1u) {
    pr[0] = gl_WorkGroupID.y;
    const int e = ids[pc.s2_off + (pr[0] / kk) * pc.s2_stride + pr[0] % kk];
    b = e >= 0 && e < pc.i1 ? uint(e) : n_expert;
    nt = 1u;
  } else {
    const uint E = n_expert + 1u, off = pc.s3_off, tile = off + E + 1u, list = off + 2u * E + 2u;
    const uint g = gl_WorkGroupID.y;
    if (g >= grp[tile + E]) return;
    b = 0u;
    while (grp[tile + b + 1u] <= g) ++b;
    const uint first = grp[off + b] + (g - grp[tile + b]) * TT;
    nt = min(TT, grp[off + b + 1u] - first);
    [[unroll]] for (uint t = 0u; t < TT; ++t) pr[t] = t < nt ? grp[list + first + t] : 0u;
  }
  const bool known = b < n_expert;
  const bool mine = known && b >= pc.u0 && b < pc.u1;
  if (!mine && (known || pc.u0 != 0u)) return;
  [[unroll]] for (uint t = 0u; t < TT; ++t) xr[t] = pc.i2 != 0 ? pr[t] : pr[t] / kk;  // i2 = op.i1
#define X_ROW(t) xr[t]
#define D_ROW(t) pr[t]
  const uint d_col = o;
  const bool live = mine && o < pc.n_ia;  // n_ia: n_out
  const uint row = pc.s0_off + ((mine ? b - pc.u0 : 0u) * pc.n_ia + o) * pc.s0_stride;
#else
  const uint t0 = gl_WorkGroupID.y * TT;
#define X_ROW(t) (t0 + (t))
#define D_ROW(t) (t0 + (t))
  const uint d_col = pc.u0 + o;
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
        const uint xb = pc.s1_off + X_ROW(t) * pc.s1_stride + c * 32u;
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
      if (t < nt) d[pc.d_off + D_ROW(t) * pc.d_stride + d_col] = acc[t];
  }
}
