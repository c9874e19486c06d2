#version 450
// Attention of query row t, head h (one workgroup each: x = h, y = t) over the cached
// positions j in [jb, je): jb = max(0, p - window + 1) (window i3, 0 = none), je =
// min(n_kv, p + 1), p = ia[t], the slot of position j is ib[j]. Scores s_j = f0 * q.k_j,
// softcapped by f1 when f1 > 0; out = softmax(s) . V.
// Keys are taken WG at a time (one per invocation) with an online softmax: a running max
// M and sum S, the accumulator rescaled by exp(M_old - M_new) per block, so any n_kv works
// with a fixed WG-entry shared array. Each invocation owns output dims tid, tid + WG, ...
// i0 = n_heads, i1 = n_kv_heads, i2 = head_dim (<= MAX_HD).
//
// Split mode (specialization constant 1 = 1, for long caches on GPUs): workgroup z = s of
// u0 splits takes only positions [jb + s * u1, jb + (s + 1) * u1) and writes its partial
// (running max, running sum, unnormalised accumulator) to binding 2 at
// ((t * n_heads + h) * u0 + s) * (head_dim + 2); attention_combine.comp merges them.
#include "common.glsl"
#include "reduce.glsl"
#define KV_QUALIFIER readonly
#include "kv.glsl"

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) writeonly buffer Part { float part[]; };
layout(constant_id = 1) const uint SPLIT = 0;

#define MAX_HD 512
#define DPT (MAX_HD / WG)
shared float q_sh[MAX_HD];
shared float p_sh[WG];
shared uint slot_sh[WG];

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint hd = uint(pc.i2);
  const uint kvh = h / uint(pc.i0 / pc.i1);
  const int p = ints[pc.ia_off + t];
  int jb = pc.i3 > 0 ? max(0, p - pc.i3 + 1) : 0;
  int je = min(int(pc.n_ib), p + 1);
  if (SPLIT == 1u) {
    jb += int(gl_WorkGroupID.z * pc.u1);
    je = min(je, jb + int(pc.u1));
  }

  const uint qb = pc.s0_off + t * pc.s0_stride + h * hd;
  for (uint i = tid; i < hd; i += WG) q_sh[i] = q[qb + i];
  barrier();

  float acc[DPT];
  [[unroll]] for (uint i = 0u; i < DPT; ++i) acc[i] = 0.0;
  float m_run = -1.0 / 0.0, s_run = 0.0;
  for (int j0 = jb; j0 < je; j0 += WG) {
    const int j = j0 + int(tid);
    float s = -1.0 / 0.0;
    uint slot = 0u;
    if (j < je) {
      slot = uint(ints[pc.ib_off + uint(j)]);
      const uint kr = pc.s2_off + slot * pc.s2_stride, ke = kvh * hd;
      float dot_qk = 0.0;
      for (uint i = 0u; i < hd; ++i) dot_qk += q_sh[i] * load_k(kr, ke + i);
      s = pc.f0 * dot_qk;
      if (pc.f1 > 0.0) s = pc.f1 * safe_tanh(s / pc.f1);
    }
    const float m_new = max(m_run, wg_max(s));  // finite: j0 < je
    const float alpha = exp(m_run - m_new);      // 0 on the first block
    const float pj = j < je ? exp(s - m_new) : 0.0;
    s_run = s_run * alpha + wg_sum(pj);
    p_sh[tid] = pj;
    slot_sh[tid] = slot;
    barrier();
    const uint nj = uint(min(WG, je - j0));
    [[unroll]] for (uint i = 0u; i < DPT; ++i) {
      const uint dim = tid + i * WG;
      if (dim < hd) {
        float a = acc[i] * alpha;
        for (uint jj = 0u; jj < nj; ++jj) a += p_sh[jj] * load_v(pc.s3_off + slot_sh[jj] * pc.s3_stride, kvh * hd + dim);
        acc[i] = a;
      }
    }
    barrier();
    m_run = m_new;
  }

  if (SPLIT == 1u) {
    const uint pb = ((t * uint(pc.i0) + h) * pc.u0 + gl_WorkGroupID.z) * (hd + 2u);
    if (tid == 0u) {
      part[pb] = m_run;
      part[pb + 1u] = s_run;
    }
    [[unroll]] for (uint i = 0u; i < DPT; ++i) {
      const uint dim = tid + i * WG;
      if (dim < hd) part[pb + 2u + dim] = acc[i];
    }
    return;
  }
  const float inv = s_run > 0.0 ? 1.0 / s_run : 0.0;
  const uint ob = pc.d_off + t * pc.d_stride + h * hd;
  [[unroll]] for (uint i = 0u; i < DPT; ++i) {
    const uint dim = tid + i * WG;
    if (dim < hd) d[ob + dim] = acc[i] * inv;
  }
}
