// The CUDA backend: weights uploaded once into device memory, the KV block pool and the
// activations in device memory, one stream per backend, each forward pass (Backend::execute)
// launched as one unit and, by default, replayed as a CUDA graph. Kernels are in the .cu
// files of this folder (cu_kernels.h).
//
// The CUDA runtime is linked statically and opens the driver only when first asked, so a
// binary with this backend starts on a machine without an NVIDIA driver; list_devices()
// and make_cuda_backend() then say why there is no device in one sentence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::cuda {

struct CudaDeviceInfo {
  int index = 0;                   // the value --cuda-device takes
  std::string name;                // e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;  // compute capability
  uint64_t memory_bytes = 0;       // total device memory
  uint64_t free_bytes = 0;         // free when listed
  int multiprocessors = 0;
  std::string driver_version;   // e.g. "13.0" (the CUDA version the driver supports)
  std::string runtime_version;  // the CUDA runtime hearth was built with
  bool usable = false;          // compute capability 7.5 or newer
  std::string why_not;          // when !usable
};

// Every CUDA device, or an error (one sentence) when there is no driver or no device.
Result<std::vector<CudaDeviceInfo>> list_devices();

struct CudaOptions {
  int device = -1;  // index into list_devices(); -1: the usable device with the most memory
  // Replay each forward pass as a CUDA graph (HEARTH_CUDA_GRAPHS=0 turns it off too).
  bool graphs = true;
  // MatMul on tensor cores (TF32, cu_matmul_mma.cu) rather than CUDA cores (f32,
  // cu_matmul.cu); compute capability 8.0 and newer. HEARTH_CUDA_MATMUL=mma turns it on,
  // =simt off. Off by default until it has been measured and checked on a GPU.
  bool tensor_cores = false;
};

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaOptions& options);

}  // namespace hearth::cuda
