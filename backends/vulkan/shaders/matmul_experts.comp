#version 450
// MatMulExperts (backend.h): matmul.glsl's MatMul with TT = 1 and the weight rows of each
// (token, rank) pair's expert, so every output is the very float MatMul gives for that
// expert's matrix and that row (the same dequantization, lanes L and reduction order; a
// MatMul token's arithmetic does not depend on TT). Grid: x = groups of WG / L output rows,
// y = pairs t * k + j of this dispatch's tokens.
#define EXPERTS 1
#include "common.glsl"
#include "matmul.glsl"
