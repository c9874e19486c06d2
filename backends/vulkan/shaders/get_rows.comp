#version 450
// GetRows: dst[i, :] = dequant(table[ids[i], :]) * f0.
// Grid: x = 32-element chunks of a row (one per invocation), y = i.
// The host binds a window of table rows [u0, u1) (tables larger than the device's storage
// range are covered by several dispatches); ids outside the window are skipped.
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
#include "dequant.glsl"

void main() {
  const uint c = gl_GlobalInvocationID.x;
  const uint i = gl_GlobalInvocationID.y;
  if (c * 32u >= pc.ne0 || i >= pc.rows) return;
  const int id = ints[pc.ia_off + i];
  if (id < int(pc.u0) || id >= int(pc.u1)) return;
  const uint n = min(32u, pc.ne0 - c * 32u);
  vec4 v[8];
  dequant_chunk(pc.s0_off + uint(id - int(pc.u0)) * pc.s0_stride, c, n, v);
  const uint o = pc.d_off + i * pc.d_stride + c * 32u;
  [[unroll]] for (uint k = 0u; k < 32u; ++k)
    if (k < n) d[o + k] = v[k / 4u][k % 4u] * pc.f0;
}
