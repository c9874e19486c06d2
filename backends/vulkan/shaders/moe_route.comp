#version 450
// MoeRoute (backend.h), one token per invocation, as backends/cpu/moe_ref.cpp computes it:
// m = max of the logits (NaN skipped), s = sum_e exp(l_e - m) in expert order, p_e =
// exp(l_e - m) * (1 / s); the k most probable experts by insertion (probability
// descending, NaN as -inf, ties to the lower id), then the weights, renormalised over the
// k (i0 = 1, the sum clamped below at f0) or not. A token's result depends on its row only.
// ne0 = n_expert, rows = n_tok, i1 = k. dst: the weights (also the insertion's scratch),
// binding 2: the ids (I32, src1's offset and stride). Grid: x = tokens / WG.
#include "common.glsl"

layout(std430, binding = 0) buffer Dst { float wt[]; };
layout(std430, binding = 1) readonly buffer Logits { float l[]; };
layout(std430, binding = 2) buffer Ids { int ids[]; };

float key(float p) { return isnan(p) ? -1.0 / 0.0 : p; }

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= pc.rows) return;
  const uint n = pc.ne0, k = uint(pc.i1);
  const uint lb = pc.s0_off + t * pc.s0_stride, wb = pc.d_off + t * pc.d_stride, ib = pc.s1_off + t * pc.s1_stride;
  float m = -1.0 / 0.0;
  for (uint e = 0u; e < n; ++e)
    if (l[lb + e] > m) m = l[lb + e];
  precise float s = 0.0;
  for (uint e = 0u; e < n; ++e) s += exp(l[lb + e] - m);
  const float inv = 1.0 / s;
  // Insertion into the sorted list ids[0 .. n_sel), their probabilities in wt: e grows, so
  // e goes before a listed id only when its key is strictly larger.
  uint n_sel = 0u;
  for (uint e = 0u; e < n; ++e) {
    const float pe = exp(l[lb + e] - m) * inv;
    if (n_sel == k && !(key(pe) > key(wt[wb + k - 1u]))) continue;
    uint i = n_sel < k ? n_sel++ : k - 1u;
    for (; i > 0u && key(pe) > key(wt[wb + i - 1u]); --i) {
      ids[ib + i] = ids[ib + i - 1u];
      wt[wb + i] = wt[wb + i - 1u];
    }
    ids[ib + i] = int(e);
    wt[wb + i] = pe;
  }
  if (pc.i0 == 0) return;
  precise float sum = 0.0;
  for (uint j = 0u; j < k; ++j) sum += wt[wb + j];
  const float div = sum < pc.f0 ? pc.f0 : sum;  // std::max(sum, f0): a NaN sum stays NaN
  for (uint j = 0u; j < k; ++j) wt[wb + j] = wt[wb + j] / div;
}
