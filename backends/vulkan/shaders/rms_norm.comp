#version 450
// RmsNorm: for row r and chunk c of ne0 = chunk elements:
//   dst[r, c] = src0[r, c] / sqrt(mean(src0[r, c]^2) + f0) * src1[0, :]
// One workgroup per (chunk x, row y); dst may alias src0 (each invocation reads its own
// elements before it writes them).
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer Src { float s[]; };
layout(std430, binding = 2) readonly buffer Wt { float wt[]; };

void main() {
  const uint c = gl_WorkGroupID.x, r = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint chunk = pc.ne0;
  const uint xb = pc.s0_off + r * pc.s0_stride + c * chunk;
  const uint yb = pc.d_off + r * pc.d_stride + c * chunk;
  float sum = 0.0;
  for (uint k = tid; k < chunk; k += WG) sum += s[xb + k] * s[xb + k];
  sum = wg_sum(sum);
  const float scale = 1.0 / sqrt(sum / float(chunk) + pc.f0);
  for (uint k = tid; k < chunk; k += WG) d[yb + k] = (s[xb + k] * scale) * wt[pc.s1_off + k];
}
