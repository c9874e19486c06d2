// The device of the CUDA device tests (op by op, end to end, prompt cache): the CUDA backend (every test
// skips, saying why, on a machine without an NVIDIA driver or device). Kernel errors come
// back as Status from execute, so there is nothing more to count.
#include "backend/device_under_test.h"
#include "backends/cuda/cuda_backend.h"

namespace hearth::test {

Result<std::unique_ptr<Backend>> make_device_under_test() {
  return cuda::make_cuda_backend({});
}

uint64_t device_error_count() {
  return 0;
}

void destroy_device_under_test(std::unique_ptr<Backend>& be) {
  be.reset();
}

}  // namespace hearth::test
