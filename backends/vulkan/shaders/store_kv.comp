#version 450
// StoreKv: kcache[ia[t], :] = k[t, :], vcache[ia[t], :] = v[t, :], converting f32 to the
// cache type. Each invocation stores one pair of elements (ne0 is even, F16 rows start on
// 4-byte boundaries), so the uint fallback writes whole words with packHalf2x16.
// Grid: x = pair index within the row, y = token.
#include "common.glsl"
#define KV_QUALIFIER writeonly
#define KV_STORE 1
#include "kv.glsl"

layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };

void main() {
  const uint p = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  if (2u * p >= pc.ne0 || t >= pc.rows) return;
  const uint slot = uint(ints[pc.ia_off + t]);
  const vec2 kk = vec2(k[pc.s0_off + t * pc.s0_stride + 2u * p], k[pc.s0_off + t * pc.s0_stride + 2u * p + 1u]);
  const vec2 vv = vec2(v[pc.s1_off + t * pc.s1_stride + 2u * p], v[pc.s1_off + t * pc.s1_stride + 2u * p + 1u]);
  const uint ko = pc.s2_off + slot * pc.s2_stride + 2u * p;
  const uint vo = pc.s3_off + slot * pc.s3_stride + 2u * p;
#if USE_FP16
  kc[ko] = float16_t(kk.x);
  kc[ko + 1u] = float16_t(kk.y);
  vc[vo] = float16_t(vv.x);
  vc[vo + 1u] = float16_t(vv.y);
#else
  if (KV_TYPE == 1u) {
    kc[ko >> 1] = packHalf2x16(kk);
    vc[vo >> 1] = packHalf2x16(vv);
  } else {
    kc[ko] = floatBitsToUint(kk.x);
    kc[ko + 1u] = floatBitsToUint(kk.y);
    vc[vo] = floatBitsToUint(vv.x);
    vc[vo + 1u] = floatBitsToUint(vv.y);
  }
#endif
}
