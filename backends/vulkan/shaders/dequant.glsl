// Dequantization of weight rows, the block layouts of backends/cpu/quant_ref.h. The
// weights are bound as `uint w[]` (any byte offset, no 8/16-bit storage needed); TYPE is
// the DType id (specialization constant 0). Rows are processed in chunks of 32 elements
// (every block size is 32 or 256): dequant_chunk expands chunk c of the row starting at
// byte `row` into v[k] = elements 4k .. 4k+3, reading the block header once. For plain
// types (F32/F16/BF16) only n (< 32 for a row's last chunk) elements are read; the rest are 0.
layout(constant_id = 0) const uint TYPE = 0;

uint rb(uint b) { return (w[b >> 2] >> ((b & 3u) << 3)) & 0xFFu; }
uint ru16(uint b) { return rb(b) | (rb(b + 1u) << 8); }
float rf16(uint b) { return unpackHalf2x16(ru16(b)).x; }
int rs8(uint b) { return int(rb(b) << 24) >> 24; }
// Four bytes at any byte offset (the second word is read only when needed, so a read never
// passes the last byte asked for).
uint ru32(uint b) {
  const uint s = (b & 3u) << 3, i = b >> 2;
  return s == 0u ? w[i] : (w[i] >> s) | (w[i + 1u] << (32u - s));
}
vec4 nibbles(uint q) { return vec4(uvec4(q, q >> 8, q >> 16, q >> 24) & 0xFu); }
vec4 bytes_u(uint q) { return vec4(uvec4(q, q >> 8, q >> 16, q >> 24) & 0xFFu); }
vec4 bytes_s(uint q) { return vec4((ivec4(uvec4(q << 24, q << 16, q << 8, q)) >> 24)); }
// Bits `bit` of the four bytes of q, as 0/1.
vec4 bits(uint q, uint bit) { return vec4(uvec4(q >> bit, q >> (bit + 8u), q >> (bit + 16u), q >> (bit + 24u)) & 1u); }

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (scales at byte s).
void scale_min_k4(uint s, uint j, out float sc, out float m) {
  if (j < 4u) {
    sc = float(rb(s + j) & 63u);
    m = float(rb(s + j + 4u) & 63u);
  } else {
    sc = float((rb(s + j + 4u) & 0xFu) | ((rb(s + j - 4u) >> 6) << 4));
    m = float((rb(s + j + 4u) >> 4) | ((rb(s + j) >> 6) << 4));
  }
}

void dequant_chunk(uint row, uint c, uint n, out vec4 v[8]) {
  if (TYPE == 0u) {  // F32
    const uint base = (row >> 2) + c * 32u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      vec4 x = vec4(0.0);
      [[unroll]] for (uint e = 0u; e < 4u; ++e)
        if (4u * k + e < n) x[e] = uintBitsToFloat(w[base + 4u * k + e]);
      v[k] = x;
    }
  } else if (TYPE == 1u || TYPE == 30u) {  // F16, BF16
    const uint base = row + c * 64u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      vec4 x = vec4(0.0);
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        if (4u * k + e < n) {
          const uint h = ru16(base + 2u * (4u * k + e));
          x[e] = TYPE == 1u ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
        }
      }
      v[k] = x;
    }
  } else if (TYPE == 2u || TYPE == 3u) {  // Q4_0: d, qs[16]; Q4_1: d, m, qs[16]
    const uint b = row + c * (TYPE == 2u ? 18u : 20u);
    const float d = rf16(b);
    const float m = TYPE == 2u ? -8.0 * d : rf16(b + 2u);
    const uint qs = b + (TYPE == 2u ? 2u : 4u);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint q = ru32(qs + 4u * k);
      if (TYPE == 2u) {
        v[k] = (nibbles(q) - 8.0) * d;
        v[k + 4u] = (nibbles(q >> 4) - 8.0) * d;
      } else {
        v[k] = nibbles(q) * d + m;
        v[k + 4u] = nibbles(q >> 4) * d + m;
      }
    }
  } else if (TYPE == 6u || TYPE == 7u) {  // Q5_0: d, qh[4], qs[16]; Q5_1: d, m, qh[4], qs[16]
    const uint b = row + c * (TYPE == 6u ? 22u : 24u);
    const float d = rf16(b);
    const float m = TYPE == 6u ? 0.0 : rf16(b + 2u);
    const uint qh = ru32(b + (TYPE == 6u ? 2u : 4u));
    const uint qs = b + (TYPE == 6u ? 6u : 8u);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint q = ru32(qs + 4u * k);
      const uint hl = qh >> (4u * k), hh = qh >> (4u * k + 16u);
      const vec4 lo = nibbles(q) + 16.0 * vec4(uvec4(hl, hl >> 1, hl >> 2, hl >> 3) & 1u);
      const vec4 hi = nibbles(q >> 4) + 16.0 * vec4(uvec4(hh, hh >> 1, hh >> 2, hh >> 3) & 1u);
      if (TYPE == 6u) {
        v[k] = (lo - 16.0) * d;
        v[k + 4u] = (hi - 16.0) * d;
      } else {
        v[k] = lo * d + m;
        v[k + 4u] = hi * d + m;
      }
    }
  } else if (TYPE == 8u) {  // Q8_0: d, qs[32]
    const uint b = row + c * 34u;
    const float d = rf16(b);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) v[k] = bytes_s(ru32(b + 2u + 4u * k)) * d;
  } else if (TYPE == 12u || TYPE == 13u) {  // Q4_K / Q5_K: d, dmin, scales[12], (qh[32]), qs[128]
    const uint g = c & 7u;  // 32-element sub-block of the 256-element super-block
    const uint b = row + (c >> 3) * (TYPE == 12u ? 144u : 176u);
    const float d = rf16(b), dmin = rf16(b + 2u);
    float sc, mn;
    scale_min_k4(b + 4u, g, sc, mn);
    const float d1 = d * sc, m1 = dmin * mn;
    const uint qs = b + (TYPE == 12u ? 16u : 48u) + 32u * (g >> 1);
    const uint shift = (g & 1u) * 4u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      vec4 q = nibbles(ru32(qs + 4u * k) >> shift);
      if (TYPE == 13u) q += 16.0 * bits(ru32(b + 16u + 4u * k), g);
      v[k] = d1 * q - m1;
    }
  } else if (TYPE == 14u) {  // Q6_K: ql[128], qh[64], scales[16] (int8), d
    const uint k8 = c & 7u, h = k8 >> 2, qq = k8 & 3u;
    const uint b = row + (c >> 3) * 210u;
    const float d = rf16(b + 208u);
    const uint ql = b + 64u * h + (qq & 1u) * 32u;
    const uint qhb = b + 128u + 32u * h;
    const uint shift = (qq >> 1) * 4u;
    const float sc0 = d * float(rs8(b + 192u + 8u * h + 2u * qq));
    const float sc1 = d * float(rs8(b + 192u + 8u * h + 1u + 2u * qq));
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint lo = ru32(ql + 4u * k) >> shift;
      const uint hi = ru32(qhb + 4u * k) >> (2u * qq);
      const vec4 q = vec4((uvec4(lo, lo >> 8, lo >> 16, lo >> 24) & 0xFu) |
                          ((uvec4(hi, hi >> 8, hi >> 16, hi >> 24) & 3u) << 4)) - 32.0;
      v[k] = (k < 4u ? sc0 : sc1) * q;
    }
  } else {
    [[unroll]] for (uint k = 0u; k < 8u; ++k) v[k] = vec4(0.0);
  }
}
