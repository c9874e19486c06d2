// The device of the Vulkan device tests (op by op, end to end, prompt cache): the Vulkan backend with the
// validation layer on (its messages are the errors finish() requires to be none).
#include "backend/device_under_test.h"
#include "backends/vulkan/vulkan_backend.h"
#include "device/driver_leak_guard.h"

namespace hearth::test {

Result<std::unique_ptr<Backend>> make_device_under_test() {
  vulkan::VulkanOptions o;
  o.validation = true;
  DriverLeakGuard guard;
  return vulkan::make_vulkan_backend(o);
}

uint64_t device_error_count() {
  return vulkan::validation_message_count();
}

void destroy_device_under_test(std::unique_ptr<Backend>& be) {
  DriverLeakGuard guard;
  be.reset();
}

}  // namespace hearth::test
