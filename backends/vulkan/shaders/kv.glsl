// Access to the K (binding 3) and V (binding 4) caches. KV_TYPE (specialization constant 0)
// is the DType id: 0 = F32, 1 = F16, 8 = Q8_0. load_k / load_v take the offset of a row in
// the binding's units (see common.glsl) and an element index within the row.
// With 16-bit storage (USE_FP16) the caches are float16_t arrays and only F16 caches use
// this variant; without it they are uint arrays read with unpackHalf2x16 (F16), as raw bits
// (F32) or byte by byte (Q8_0: offsets in bytes; a row is blocks of 34 bytes, an f16 scale d
// then 32 int8 q, element = d * q, as ggml's block_q8_0).
layout(constant_id = 0) const uint KV_TYPE = 1;

#if USE_FP16
layout(std430, binding = 3) KV_QUALIFIER buffer KCache { float16_t kc[]; };
layout(std430, binding = 4) KV_QUALIFIER buffer VCache { float16_t vc[]; };
#ifndef KV_STORE
float load_k(uint row, uint e) { return float(kc[row + e]); }
float load_v(uint row, uint e) { return float(vc[row + e]); }
#endif
#else
layout(std430, binding = 3) KV_QUALIFIER buffer KCache { uint kc[]; };
layout(std430, binding = 4) KV_QUALIFIER buffer VCache { uint vc[]; };
#ifndef KV_STORE
// Element e of a Q8_0 row whose block holds it starts at byte b (even, so the scale's two
// bytes share one word): the scale is the word's low or high half, q is sign-extended.
float q8_0_element(uint scale_word, uint b, uint q_word, uint q_byte) {
  const float d = unpackHalf2x16(scale_word >> (8u * (b & 2u))).x;
  return d * float(int(q_word << (24u - 8u * (q_byte & 3u))) >> 24);
}
// load_k reads kc, load_v vc (a buffer cannot be a function argument).
#define KV_LOAD(NAME, BUF)                                                  \
  float NAME(uint row, uint e) {                                            \
    if (KV_TYPE == 8u) {                                                    \
      const uint b = row + (e >> 5) * 34u, q = b + 2u + (e & 31u);          \
      return q8_0_element(BUF[b >> 2], b, BUF[q >> 2], q);                  \
    }                                                                       \
    const uint i = row + e;                                                 \
    return KV_TYPE == 1u ? unpackHalf2x16(BUF[i >> 1])[i & 1u] : uintBitsToFloat(BUF[i]); \
  }
KV_LOAD(load_k, kc)
KV_LOAD(load_v, vc)
#endif
#endif
