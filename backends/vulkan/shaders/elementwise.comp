#version 450
// Add (u0 = 0): dst = src0 + src1; Scale (1): src0 * f0; GeluMul (2): gelu_tanh(src0) *
// src1 with x and gelu(x) rounded through f16 as the CPU backend's table does; SiluMul (3):
// silu(src0) * src1; Softcap (4): f0 * tanh(src0 / f0); AddRow (5): dst[r] = src0[r] +
// src1[0] (a bias row added to every row). dst may alias src0 or src1.
// Grid: x = element within the row, y = row.
#include "common.glsl"

layout(std430, binding = 0) buffer Dst { float d[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };

float round_f16(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }

float gelu_f16(float x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  const float h = round_f16(x);
  const float g = 0.5 * h * (1.0 + safe_tanh(0.79788456080286535588 * h * (1.0 + 0.044715 * h * h)));
  return round_f16(g);
}

void main() {
  const uint k = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  if (k >= pc.ne0 || r >= pc.rows) return;
  const float x = a[pc.s0_off + r * pc.s0_stride + k];
  float y;
  if (pc.u0 == 0u) {
    y = x + b[pc.s1_off + r * pc.s1_stride + k];
  } else if (pc.u0 == 1u) {
    y = x * pc.f0;
  } else if (pc.u0 == 2u) {
    y = gelu_f16(x) * b[pc.s1_off + r * pc.s1_stride + k];
  } else if (pc.u0 == 3u) {
    y = x / (1.0 + exp(-x)) * b[pc.s1_off + r * pc.s1_stride + k];
  } else if (pc.u0 == 4u) {
    y = pc.f0 * safe_tanh(x / pc.f0);
  } else {
    y = x + b[pc.s1_off + k];
  }
  d[pc.d_off + r * pc.d_stride + k] = y;
}
