// backends/cuda/cu_matmul_mma.cu compiled by the host compiler, its kernels run by cuda_on_host.h.
#include "cuda_on_host.h"
// (cuda_on_host.h first: it defines HEARTH_LAUNCH.)
#include "backends/cuda/cu_matmul_mma.cu"
