// The mixture-of-experts routing and combination of the CUDA backend (cu_kernels.h), each the
// scalar reference backends/cpu/moe_ref.cpp operation for operation: the adds and multiplies
// are _rn intrinsics (never fused), the division IEEE (nvcc's default -prec-div). What can
// differ from the CPU is expf (2 ulp on the device; the host's expf when these kernels run
// on the host, tests/backend/cuda_on_host.h): a router weight within a few ulp, and the
// order of two experts whose probabilities lie that close.
#include <cmath>

#include "backends/cuda/cu_common.cuh"
#include "backends/cuda/cu_kernels.h"

namespace hearth::cuda {
namespace {

constexpr int kRouteBlock = 64;  // tokens per block of moe_route_kernel
constexpr int kBlock = 256;      // elements per block of moe_combine_kernel

// The order of the top-k: probability descending, NaN as -inf.
__device__ __forceinline__ float route_key(float p) {
  return p != p ? -INFINITY : p;
}

// One thread per token: softmax in expert order, insertion into the sorted top k (ids and
// their probabilities in the token's rows of ids and w), then the renormalisation.
__global__ void moe_route_kernel(const void* logits, size_t l_stride, int64_t n_tok, int64_t n_expert, int64_t k,
                                 bool renorm, float min_sum, void* ids, size_t i_stride, void* weights,
                                 size_t w_stride) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n_tok) return;
  const float* l = row_ptr<float>(logits, t, l_stride);
  int32_t* id = row_ptr<int32_t>(ids, t, i_stride);
  float* w = row_ptr<float>(weights, t, w_stride);
  float m = -INFINITY;
  for (int64_t e = 0; e < n_expert; ++e)
    if (l[e] > m) m = l[e];
  float s = 0.0f;
  for (int64_t e = 0; e < n_expert; ++e) s = __fadd_rn(s, expf(__fsub_rn(l[e], m)));
  const float inv = 1.0f / s;
  // e grows, so it goes before a listed expert only when its key is strictly larger.
  int64_t n_sel = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    const float pe = __fmul_rn(expf(__fsub_rn(l[e], m)), inv);
    if (n_sel == k && !(route_key(pe) > route_key(w[k - 1]))) continue;
    int64_t i = n_sel < k ? n_sel++ : k - 1;
    for (; i > 0 && route_key(pe) > route_key(w[i - 1]); --i) {
      id[i] = id[i - 1];
      w[i] = w[i - 1];
    }
    id[i] = static_cast<int32_t>(e);
    w[i] = pe;
  }
  if (!renorm) return;
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) sum = __fadd_rn(sum, w[j]);
  const float div = sum < min_sum ? min_sum : sum;  // std::max(sum, min_sum): a NaN sum stays NaN
  for (int64_t j = 0; j < k; ++j) w[j] = w[j] / div;
}

// Grid: x = elements, y = tokens (looping past the grid's height).
__global__ void moe_combine_kernel(const void* x, size_t x_stride, const void* weights, size_t w_stride, int64_t k,
                                   void* dst, size_t d_stride, int64_t ne0, int64_t n_tok) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= ne0) return;
  for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
    const float* w = row_ptr<float>(weights, t, w_stride);
    float y = __fmul_rn(row_ptr<float>(x, t * k, x_stride)[i], w[0]);
    for (int64_t j = 1; j < k; ++j) y = __fadd_rn(y, __fmul_rn(row_ptr<float>(x, t * k + j, x_stride)[i], w[j]));
    row_ptr<float>(dst, t, d_stride)[i] = y;
  }
}

}  // namespace

void launch_moe_route(const DevRows& logits, bool renorm, float min_sum, const DevRows& ids, const DevRows& weights,
                      cudaStream_t stream) {
  if (logits.rows <= 0) return;
  HEARTH_LAUNCH(div_up_u(logits.rows, kRouteBlock), kRouteBlock, stream, moe_route_kernel)(
      logits.ptr, logits.stride, logits.rows, logits.ne0, weights.ne0, renorm, min_sum, ids.ptr, ids.stride,
      weights.ptr, weights.stride);
}

void launch_moe_combine(const DevRows& x, const DevRows& w, const DevRows& dst, cudaStream_t stream) {
  if (dst.rows <= 0 || dst.ne0 <= 0) return;
  const dim3 grid(div_up_u(dst.ne0, kBlock), static_cast<unsigned>(dst.rows < kMaxGridY ? dst.rows : kMaxGridY));
  HEARTH_LAUNCH(grid, kBlock, stream, moe_combine_kernel)(x.ptr, x.stride, w.ptr, w.stride, w.ne0, dst.ptr, dst.stride,
                                                         dst.ne0, dst.rows);
}

}  // namespace hearth::cuda
