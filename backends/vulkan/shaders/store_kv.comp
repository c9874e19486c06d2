#version 450
// StoreKv: kcache[ia[t], :] = k[t, :], vcache[ia[t], :] = v[t, :], converting f32 to the
// cache type. F16 / F32: each invocation stores one pair of elements (ne0 is even, F16 rows
// start on 4-byte boundaries), so the uint fallback writes whole words with packHalf2x16.
// Q8_0 (uint variant only; offsets in bytes): each invocation quantizes 64 elements, two
// blocks of 34 bytes = 17 whole words (ne0 % 64 == 0, rows on 4-byte boundaries), as
// ggml's reference quantizer does: d = max|x| / 127, q = round(x / d) half away from zero.
// Grid: x = pair (or pair of blocks) index within the row, y = token.
#include "common.glsl"
#define KV_QUALIFIER writeonly
#define KV_STORE 1
#include "kv.glsl"

layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };

#if !USE_FP16
// Bytes of two quantized blocks: [d0 lo, d0 hi, 32 x q0, d1 lo, d1 hi, 32 x q1].
uint q_bytes[68];
#endif

void main() {
  const uint p = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  if (t >= pc.rows) return;
  const uint slot = uint(ints[pc.ia_off + t]);
#if !USE_FP16
  if (KV_TYPE == 8u) {
    if (64u * p >= pc.ne0) return;
    for (uint which = 0u; which < 2u; ++which) {
      const uint src = (which == 0u ? pc.s0_off + t * pc.s0_stride : pc.s1_off + t * pc.s1_stride) + 64u * p;
      for (uint blk = 0u; blk < 2u; ++blk) {
        const uint base = src + 32u * blk;
        float amax = 0.0;
        for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(which == 0u ? k[base + i] : v[base + i]));
        const float d = amax / 127.0;
        const float id = d != 0.0 ? 1.0 / d : 0.0;
        const uint dh = packHalf2x16(vec2(d, 0.0)) & 0xFFFFu;
        const uint o = 34u * blk;
        q_bytes[o] = dh & 0xFFu;
        q_bytes[o + 1u] = dh >> 8;
        for (uint i = 0u; i < 32u; ++i) {
          const float x = (which == 0u ? k[base + i] : v[base + i]) * id;
          q_bytes[o + 2u + i] = uint(int(sign(x) * floor(abs(x) + 0.5))) & 0xFFu;
        }
      }
      const uint w0 = ((which == 0u ? pc.s2_off + slot * pc.s2_stride : pc.s3_off + slot * pc.s3_stride) + 68u * p) >> 2;
      for (uint w = 0u; w < 17u; ++w) {
        const uint word = q_bytes[4u * w] | (q_bytes[4u * w + 1u] << 8) | (q_bytes[4u * w + 2u] << 16) |
                          (q_bytes[4u * w + 3u] << 24);
        if (which == 0u) kc[w0 + w] = word; else vc[w0 + w] = word;
      }
    }
    return;
  }
#endif
  if (2u * p >= pc.ne0) return;
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
