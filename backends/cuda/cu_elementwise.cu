// Row-wise kernels of the CUDA backend: RmsNorm, RoPE, the elementwise activations and row
// copies (cu_kernels.h). Each mirrors the CPU backend's scalar formula (backends/cpu/
// ops_basic.cpp) operation for operation; where nvcc would fuse a multiply and an add that
// the CPU rounds separately, the kernels use the _rn intrinsics, which are never fused.
//
// Views are byte-strided F32 rows (a stride is a multiple of 4 bytes, nothing more), so
// every access is a plain 4-byte load or store, consecutive threads on consecutive elements.
#include "backends/backend.h"
#include "backends/cuda/cu_common.cuh"
#include "backends/cuda/cu_kernels.h"
#include "backends/rope_math.h"

namespace hearth::cuda {
namespace {

constexpr int kBlock = 256;  // threads per block of the elementwise kernels

// --- RmsNorm --------------------------------------------------------------------------------
// One group of kTpc threads per (row, chunk) item, kBlock / kTpc items per block. The sum of
// squares is accumulated in double, as the CPU does (each product x*x is exact in double, so
// only the order of the double additions differs and the f32 scale almost always comes out
// equal). dst may alias src: each element is read and written by the same thread, and every
// read of the sum happens before the reduction that precedes the writes.
template <int kTpc>
__global__ void rms_norm_kernel(const void* src, size_t src_stride, const float* weight, void* dst, size_t dst_stride,
                                int64_t chunk, int64_t n_chunks, int64_t n_items, float eps) {
  constexpr int kItemsPerBlock = kBlock / kTpc;
  constexpr int kWarpsPerItem = kTpc / kWarp;
  const int local = static_cast<int>(threadIdx.x) / kTpc;
  const int sub = static_cast<int>(threadIdx.x) % kTpc;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kItemsPerBlock + local;
  const bool active = item < n_items;
  const int64_t r = active ? item / n_chunks : 0;
  const int64_t c = active ? item % n_chunks : 0;
  const float* x = row_ptr<float>(src, r, src_stride) + c * chunk;
  float* y = row_ptr<float>(dst, r, dst_stride) + c * chunk;

  double sum = 0.0;
  if (active)
    for (int64_t k = sub; k < chunk; k += kTpc) sum += static_cast<double>(x[k]) * static_cast<double>(x[k]);
  sum = warp_sum(sum);
  if constexpr (kWarpsPerItem > 1) {
    __shared__ double part[kBlock / kWarp];
    if (threadIdx.x % kWarp == 0) part[threadIdx.x / kWarp] = sum;
    __syncthreads();
    sum = 0.0;
    for (int i = 0; i < kWarpsPerItem; ++i) sum += part[local * kWarpsPerItem + i];  // same order in every thread
  }
  if (!active) return;
  const float scale = 1.0f / sqrtf(static_cast<float>(sum / static_cast<double>(chunk)) + eps);
  for (int64_t k = sub; k < chunk; k += kTpc) y[k] = (x[k] * scale) * weight[k];
}

template <int kTpc>
void launch_rms_norm_tpc(const DevRows& src, const float* weight, int64_t chunk, float eps, const DevRows& dst,
                         cudaStream_t stream) {
  const int64_t n_chunks = src.ne0 / chunk;
  const int64_t n_items = src.rows * n_chunks;
  HEARTH_LAUNCH(div_up_u(n_items, kBlock / kTpc), kBlock, stream, rms_norm_kernel<kTpc>)(
      src.ptr, src.stride, weight, dst.ptr, dst.stride, chunk, n_chunks, n_items, eps);
}

// --- RoPE -----------------------------------------------------------------------------------
// One thread per (token t, pair j): the angle and its cos / sin once, then pair j of every
// head. out0 = x0 c - x1 s, out1 = x0 s + x1 c, each product rounded before the sum as on
// the CPU.
__global__ void rope_kernel(void* x, size_t stride, const int32_t* positions, int64_t n_tok, int64_t n_heads,
                            int32_t head_dim, int32_t half_rot, bool neox, float ratio, float pos_scale) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tok * half_rot) return;
  const int64_t t = idx / half_rot;
  const int j = static_cast<int>(idx % half_rot);
  const float theta = rope_theta(positions[t], pos_scale, ratio, j);
  float s, c;
  sincosf(theta, &s, &c);
  const int i0 = neox ? j : 2 * j;
  const int i1 = neox ? j + half_rot : 2 * j + 1;
  float* row = row_ptr<float>(x, t, stride);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = row + h * head_dim;
    const float x0 = xh[i0], x1 = xh[i1];
    xh[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    xh[i1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

// --- elementwise ----------------------------------------------------------------------------
// Grid: x = element block of the row, y = row (looping past 65535 rows). dst may alias a
// source: every element is read and then written by the same thread.
template <Unary kKind>
__global__ void unary_kernel(const void* src, size_t src_stride, void* dst, size_t dst_stride, int64_t ne0,
                             int64_t rows, float f0) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= ne0) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float x = row_ptr<float>(src, r, src_stride)[k];
    float y;
    if constexpr (kKind == Unary::Scale) {
      y = x * f0;
    } else {
      y = f0 * tanhf(x / f0);
    }
    row_ptr<float>(dst, r, dst_stride)[k] = y;
  }
}

// b_stride 0 broadcasts b's row 0 to every row (AddRow).
template <Binary kKind>
__global__ void binary_kernel(const void* a, size_t a_stride, const void* b, size_t b_stride, void* dst,
                              size_t dst_stride, int64_t ne0, int64_t rows) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= ne0) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float x = row_ptr<float>(a, r, a_stride)[k];
    const float z = row_ptr<float>(b, r, b_stride)[k];
    float y;
    if constexpr (kKind == Binary::Add) {
      y = x + z;
    } else if constexpr (kKind == Binary::GeluMul) {
      y = gelu_f16_table(x) * z;
    } else {
      y = (x / (1.0f + expf(-x))) * z;  // silu(x) * z
    }
    row_ptr<float>(dst, r, dst_stride)[k] = y;
  }
}

__global__ void copy_rows_kernel(const void* src, size_t src_stride, const int32_t* ids, int64_t n_ids, void* dst,
                                 size_t dst_stride, int64_t ne0) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= ne0) return;
  for (int64_t i = blockIdx.y; i < n_ids; i += gridDim.y)
    row_ptr<float>(dst, i, dst_stride)[k] = row_ptr<float>(src, ids[i], src_stride)[k];
}

dim3 row_grid(int64_t ne0, int64_t rows) {
  return dim3(div_up_u(ne0, kBlock), static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
}

}  // namespace

void launch_rms_norm(const DevRows& src, const float* weight, int64_t chunk, float eps, const DevRows& dst,
                     cudaStream_t stream) {
  if (src.rows <= 0 || src.ne0 <= 0 || chunk <= 0) return;
  // Enough threads per chunk that each loads a handful of elements: a head (64 .. 512) takes
  // one warp, a whole hidden state 4 or 8.
  if (chunk <= 512) return launch_rms_norm_tpc<32>(src, weight, chunk, eps, dst, stream);
  if (chunk <= 2048) return launch_rms_norm_tpc<128>(src, weight, chunk, eps, dst, stream);
  launch_rms_norm_tpc<256>(src, weight, chunk, eps, dst, stream);
}

void launch_rope(const DevRows& x, const int32_t* positions, int32_t head_dim, int32_t n_rot, int32_t mode,
                 float freq_base, float pos_scale, cudaStream_t stream) {
  const int32_t half_rot = n_rot / 2;
  if (x.rows <= 0 || x.ne0 <= 0 || head_dim <= 0 || half_rot <= 0) return;
  // The ratio on the host with the CPU's own function (std::pow in float), so the angles'
  // starting point is the same bits on both.
  const float ratio = rope_theta_ratio(freq_base, n_rot);
  const int64_t n_threads = x.rows * half_rot;
  constexpr int kRopeBlock = 128;
  HEARTH_LAUNCH(div_up_u(n_threads, kRopeBlock), kRopeBlock, stream, rope_kernel)(
      x.ptr, x.stride, positions, x.rows, x.ne0 / head_dim, head_dim, half_rot, mode == kRopeNeox, ratio, pos_scale);
}

void launch_unary(Unary kind, const DevRows& src, float f0, const DevRows& dst, cudaStream_t stream) {
  if (src.rows <= 0 || src.ne0 <= 0) return;
  const dim3 grid = row_grid(src.ne0, src.rows);
  switch (kind) {
    case Unary::Scale:
      HEARTH_LAUNCH(grid, kBlock, stream, unary_kernel<Unary::Scale>)(src.ptr, src.stride, dst.ptr, dst.stride, src.ne0, src.rows, f0);
      break;
    case Unary::Softcap:
      HEARTH_LAUNCH(grid, kBlock, stream, unary_kernel<Unary::Softcap>)(src.ptr, src.stride, dst.ptr, dst.stride, src.ne0, src.rows, f0);
      break;
  }
}

void launch_binary(Binary kind, const DevRows& a, const DevRows& b, bool b_broadcast, const DevRows& dst,
                   cudaStream_t stream) {
  if (a.rows <= 0 || a.ne0 <= 0) return;
  const dim3 grid = row_grid(a.ne0, a.rows);
  const size_t b_stride = b_broadcast ? 0 : b.stride;
  switch (kind) {
    case Binary::Add:
      HEARTH_LAUNCH(grid, kBlock, stream, binary_kernel<Binary::Add>)(a.ptr, a.stride, b.ptr, b_stride, dst.ptr, dst.stride, a.ne0, a.rows);
      break;
    case Binary::GeluMul:
      HEARTH_LAUNCH(grid, kBlock, stream, binary_kernel<Binary::GeluMul>)(a.ptr, a.stride, b.ptr, b_stride, dst.ptr, dst.stride, a.ne0, a.rows);
      break;
    case Binary::SiluMul:
      HEARTH_LAUNCH(grid, kBlock, stream, binary_kernel<Binary::SiluMul>)(a.ptr, a.stride, b.ptr, b_stride, dst.ptr, dst.stride, a.ne0, a.rows);
      break;
  }
}

void launch_copy_rows(const DevRows& src, const int32_t* ids, int64_t n_ids, const DevRows& dst, cudaStream_t stream) {
  if (n_ids <= 0 || src.ne0 <= 0) return;
  HEARTH_LAUNCH(row_grid(src.ne0, n_ids), kBlock, stream, copy_rows_kernel)(src.ptr, src.stride, ids, n_ids, dst.ptr,
                                                                    dst.stride, src.ne0);
}

}  // namespace hearth::cuda
