// The tensor-core MatMul's kernel and launcher: the warp's work is mma::warp_tile
// (cu_matmul_mma.cuh), given the device's lane, __syncwarp, cp.async, cvt.rna.tf32 and
// mma.sync here.
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cu_matmul_mma.cuh"

namespace hearth::cuda {
namespace {

using mma::kApitch;
using mma::kRows;
using mma::kThreads;
using mma::kWarps;

struct DeviceWarp {
  int lane_;
  __device__ int lane() const { return lane_; }
  __device__ void sync() const { __syncwarp(); }
  template <int kSize>
  __device__ void copy(uint8_t* dst, const uint8_t* src) const {
    __pipeline_memcpy_async(dst, src, kSize);
  }
  __device__ void wait_copies() const {
    __pipeline_commit();
    __pipeline_wait_prior(0);
  }
  // f32 -> TF32 (round to nearest, ties away from zero), as the 32-bit pattern mma reads.
  __device__ uint32_t tf32(float f) const {
    uint32_t r = 0;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
#elif defined(HEARTH_CUDA_ON_HOST)  // tests/backend/cuda_on_host.h
    r = host_emu::tf32_rna(f);
#else
    (void)f;
#endif
    return r;
  }
  // c += A (16 x 8) * B (8 x 8), fragments as mma::warp_tile describes.
  __device__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) const {
#if __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(HEARTH_CUDA_ON_HOST)
    host_emu::mma_tf32(c, a, b0, b1);
#else
    (void)c, (void)a, (void)b0, (void)b1;
    __trap();  // launch_matmul_mma is never called below compute capability 8.0
#endif
  }
};

template <DType T, int NT>
__global__ void __launch_bounds__(kThreads) mma_kernel(mma::Args p) {
  __shared__ __align__(16) uint8_t stage_sh[kWarps][kRows * mma::Stage<T>::kPitch];
  __shared__ __align__(16) uint32_t a_sh[kWarps][kRows * kApitch];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  DeviceWarp wp{static_cast<int>(threadIdx.x) % 32};
  mma::warp_tile<T, NT>(wp, p, blockIdx.x, warp, stage_sh[warp], a_sh[warp]);
}

template <DType T>
void mma_matmul_t(const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  mma::Args p;
  p.w = static_cast<const uint8_t*>(w.ptr);
  p.w_stride = w.stride;
  p.n_out = w.rows;
  p.n_in = w.ne0;
  p.x = static_cast<const uint8_t*>(x.ptr);
  p.x_stride = x.stride;
  p.n_tok = x.rows;
  p.dst = static_cast<uint8_t*>(dst.ptr);
  p.d_stride = dst.stride;
  const mma::Grid gr = mma::grid_for(w.rows, x.rows);
  p.n_tiles = gr.n_tiles;
  if (gr.nt == 1) {
    HEARTH_LAUNCH(static_cast<unsigned>(gr.blocks), kThreads, stream, mma_kernel<T, 1>)(p);
  } else {
    HEARTH_LAUNCH(static_cast<unsigned>(gr.blocks), kThreads, stream, mma_kernel<T, 4>)(p);
  }
}

}  // namespace

void launch_matmul_mma(DType type, const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream) {
  if (w.rows == 0 || x.rows == 0) return;
  dispatch_weight_type(type, [&]<DType T>() { mma_matmul_t<T>(w, x, dst, stream); });
}

}  // namespace hearth::cuda
