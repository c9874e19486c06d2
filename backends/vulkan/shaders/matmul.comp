#version 450
// MatMul (backend.h): the shared body is matmul.glsl.
#include "common.glsl"
#include "matmul.glsl"
