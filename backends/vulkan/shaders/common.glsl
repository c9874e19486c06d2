// Shared by every shader: extensions, workgroup size, the push-constant block and the
// Graph::ints binding. Offsets and strides are in units of the binding's element type
// (floats for F32 tensors, halves for an F16 KV cache, bytes for weights), relative to the
// start of the bound range; the host binds whole buffers or windows of them.
#extension GL_EXT_control_flow_attributes : enable
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#if USE_FP16
#extension GL_EXT_shader_16bit_storage : require
#endif

#define WG 64
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

// Mirrors PushConstants in vk_recorder.h (24 x 4 bytes).
layout(push_constant) uniform PushConstants {
  uint d_off;
  uint s0_off;
  uint s1_off;
  uint s2_off;
  uint s3_off;
  uint d_stride;
  uint s0_stride;
  uint s1_stride;
  uint s2_stride;
  uint s3_stride;
  uint ne0;
  uint rows;
  uint ia_off;
  uint ib_off;
  uint n_ia;
  uint n_ib;
  int i0;
  int i1;
  int i2;
  int i3;
  float f0;
  float f1;
  uint u0;
  uint u1;
} pc;

layout(std430, binding = 5) readonly buffer Ints { int ints[]; };

// tanh that stays finite for any argument (tanh saturates to +-1 within f32 past |x| ~ 9).
float safe_tanh(float x) { return tanh(clamp(x, -15.0, 15.0)); }
