#version 450
// Rope, in place on dst [n_tok, n_heads * head_dim]. i0 = head_dim, i1 = rotated dims,
// i2 = layout (0 normal: pairs (2j, 2j+1); 2 neox: pairs (j, j + i1/2)); f0 = theta
// scale = base^(-2/i1) (computed on the host as the CPU backend does), f1 = position
// scale. theta_j = pos * f1 * f0^j, multiplied up in f32 like the CPU reference.
// Grid: x = head * (i1/2) + j, y = token.
#include "common.glsl"

layout(std430, binding = 0) buffer Dst { float d[]; };

void main() {
  const uint half_rot = uint(pc.i1) / 2u;
  const uint idx = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  const uint n_heads = pc.ne0 / uint(pc.i0);
  if (idx >= n_heads * half_rot || t >= pc.rows) return;
  const uint h = idx / half_rot, j = idx % half_rot;
  float theta = float(ints[pc.ia_off + t]) * pc.f1;
  for (uint k = 0u; k < j; ++k) theta *= pc.f0;
  const float cs = cos(theta), sn = sin(theta);
  const bool neox = pc.i2 == 2;
  const uint base = pc.d_off + t * pc.d_stride + h * uint(pc.i0);
  const uint a = base + (neox ? j : 2u * j);
  const uint b = base + (neox ? j + half_rot : 2u * j + 1u);
  const float x0 = d[a], x1 = d[b];
  d[a] = x0 * cs - x1 * sn;
  d[b] = x0 * sn + x1 * cs;
}
