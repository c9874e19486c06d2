#version 450
// CopyRows: dst[i, :] = src0[ids[i], :] (F32). Grid: x = element, y = i.
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer Src { float s[]; };

void main() {
  const uint k = gl_GlobalInvocationID.x, i = gl_GlobalInvocationID.y;
  if (k >= pc.ne0 || i >= pc.rows) return;
  d[pc.d_off + i * pc.d_stride + k] = s[pc.s0_off + uint(ints[pc.ia_off + i]) * pc.s0_stride + k];
}
