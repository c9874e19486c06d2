// The device backend a device test binary runs against the CPU backend: Vulkan (with the
// validation layer on) or CUDA, chosen by which of device_vulkan.cpp / device_cuda.cpp the
// binary links (libraries hearth_test_device_vulkan / hearth_test_device_cuda). Tests are
// written once and built once per device backend; DEVICE (a string literal, a compile
// definition of each binary) names the device in test names and messages.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::test {

// The device backend, or why none can run hearth here (the test then skips, saying so).
Result<std::unique_ptr<Backend>> make_device_under_test();
// Errors the device backend reported outside Status results so far (Vulkan: validation
// messages; CUDA: none, its kernel errors come back from execute).
uint64_t device_error_count();
// Destroys a device backend made by make_device_under_test.
void destroy_device_under_test(std::unique_ptr<Backend>& be);

}  // namespace hearth::test
