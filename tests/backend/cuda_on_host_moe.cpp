// backends/cuda/cu_moe.cu compiled by the host compiler, its kernels run by cuda_on_host.h.
#include "cuda_on_host.h"
// (cuda_on_host.h first: it defines HEARTH_LAUNCH.)
#include "backends/cuda/cu_moe.cu"
