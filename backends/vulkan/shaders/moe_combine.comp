#version 450
// MoeCombine (backend.h): dst[t, i] = sum_{j < k} w[t, j] * x[t * k + j, i], each product
// rounded to f32 and added in rank order (precise: no fused multiply-add), as
// backends/cpu/moe_ref.cpp's moe_combine_row. ne0 = d, rows = n_tok, i0 = k.
// Grid: x = element, y = token.
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  if (i >= pc.ne0 || t >= pc.rows) return;
  const uint k = uint(pc.i0), wb = pc.s1_off + t * pc.s1_stride, xb = pc.s0_off + t * k * pc.s0_stride + i;
  precise float y = x[xb] * w[wb];
  for (uint j = 1u; j < k; ++j) {
    precise float p = x[xb + j * pc.s0_stride] * w[wb + j];
    y = y + p;
  }
  d[pc.d_off + t * pc.d_stride + i] = y;
}
