#version 450
// Merges the split partials of attention.comp (split mode) for query row t, head h (one
// workgroup each: x = h, y = t): M = max_s m_s, S = sum_s l_s e^(m_s - M),
// out = sum_s acc_s e^(m_s - M) / S. Splits that saw no position have m_s = -inf.
// u0 = splits, i0 = n_heads, i2 = head_dim; partials at binding 1.
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer Part { float part[]; };

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint hd = uint(pc.i2), n_split = pc.u0;
  const uint base = (t * uint(pc.i0) + h) * n_split * (hd + 2u);
  float m = -1.0 / 0.0;
  for (uint s = 0u; s < n_split; ++s) m = max(m, part[base + s * (hd + 2u)]);
  float sum = 0.0;
  for (uint s = 0u; s < n_split; ++s) {
    const float ms = part[base + s * (hd + 2u)];
    if (ms > -1.0 / 0.0) sum += part[base + s * (hd + 2u) + 1u] * exp(ms - m);
  }
  const float inv = sum > 0.0 ? 1.0 / sum : 0.0;
  const uint ob = pc.d_off + t * pc.d_stride + h * hd;
  for (uint dim = tid; dim < hd; dim += WG) {
    float a = 0.0;
    for (uint s = 0u; s < n_split; ++s) {
      const float ms = part[base + s * (hd + 2u)];
      if (ms > -1.0 / 0.0) a += part[base + s * (hd + 2u) + 2u + dim] * exp(ms - m);
    }
    d[ob + dim] = a * inv;
  }
}
