#version 450
// MatMulExperts (backend.h): matmul.glsl's MatMul with the weight rows of each (token, rank)
// pair's expert, so every output is the very float MatMul gives for that expert's matrix and
// that row (the same dequantization, lanes L and reduction order; a MatMul token's
// arithmetic does not depend on TT or on the other rows of its tile). TT = 1: one pair per
// workgroup row (decode); TT = 8: tiles of up to 8 pairs of one expert, as moe_group.comp
// grouped them (prefill: an expert's rows read once per 8 of its pairs). Grid: x = groups
// of WG / L output rows, y = pairs (TT = 1) or tiles (an upper bound: extra ones return).
#define EXPERTS 1
#include "common.glsl"
#include "matmul.glsl"
