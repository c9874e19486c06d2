// Workgroup-wide sum and max of one float per invocation: subgroup arithmetic plus a
// shared array of per-subgroup partials when USE_SUBGROUP, else a shared-memory tree.
// Every invocation of the workgroup must call these (they contain barriers).
shared float red_sh[WG];

float wg_sum(float v) {
#if USE_SUBGROUP
  v = subgroupAdd(v);
  if (subgroupElect()) red_sh[gl_SubgroupID] = v;
  barrier();
  float r = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; ++i) r += red_sh[i];
  barrier();
  return r;
#else
  const uint tid = gl_LocalInvocationID.x;
  red_sh[tid] = v;
  barrier();
  [[unroll]] for (uint s = WG / 2; s > 0u; s >>= 1) {
    if (tid < s) red_sh[tid] += red_sh[tid + s];
    barrier();
  }
  const float r = red_sh[0];
  barrier();
  return r;
#endif
}

float wg_max(float v) {
#if USE_SUBGROUP
  v = subgroupMax(v);
  if (subgroupElect()) red_sh[gl_SubgroupID] = v;
  barrier();
  float r = red_sh[0];
  for (uint i = 1u; i < gl_NumSubgroups; ++i) r = max(r, red_sh[i]);
  barrier();
  return r;
#else
  const uint tid = gl_LocalInvocationID.x;
  red_sh[tid] = v;
  barrier();
  [[unroll]] for (uint s = WG / 2; s > 0u; s >>= 1) {
    if (tid < s) red_sh[tid] = max(red_sh[tid], red_sh[tid + s]);
    barrier();
  }
  const float r = red_sh[0];
  barrier();
  return r;
#endif
}
