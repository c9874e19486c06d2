// Access to the K (binding 3) and V (binding 4) caches, indexed in elements of the cache
// type. KV_TYPE (specialization constant 0) is the DType id: 1 = F16, 0 = F32. With 16-bit
// storage (USE_FP16) the caches are float16_t arrays and only F16 caches use this variant;
// without it they are uint arrays read with unpackHalf2x16 (F16) or as raw bits (F32).
layout(constant_id = 0) const uint KV_TYPE = 1;

#if USE_FP16
layout(std430, binding = 3) KV_QUALIFIER buffer KCache { float16_t kc[]; };
layout(std430, binding = 4) KV_QUALIFIER buffer VCache { float16_t vc[]; };
#ifndef KV_STORE
float load_k(uint i) { return float(kc[i]); }
float load_v(uint i) { return float(vc[i]); }
#endif
#else
layout(std430, binding = 3) KV_QUALIFIER buffer KCache { uint kc[]; };
layout(std430, binding = 4) KV_QUALIFIER buffer VCache { uint vc[]; };
#ifndef KV_STORE
float load_k(uint i) { return KV_TYPE == 1u ? unpackHalf2x16(kc[i >> 1])[i & 1u] : uintBitsToFloat(kc[i]); }
float load_v(uint i) { return KV_TYPE == 1u ? unpackHalf2x16(vc[i >> 1])[i & 1u] : uintBitsToFloat(vc[i]); }
#endif
#endif
