// The CPU backend: the reference every other backend is tested against. Buffers are
// plain host memory (weights are the GGUF mapping itself, except the Q4_0 / Q5_0 / Q8_0 /
// Q4_K / Q6_K matrices repacked at load, see repack.h); operations run on a
// thread pool, each split by rows so a row's arithmetic never depends on the batch.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace hearth::cpu {

struct CpuBackendOptions {
  int n_threads = 0;  // 0 = one per physical core
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace hearth::cpu
