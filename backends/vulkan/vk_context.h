// Instance, physical device choice and logical device of the Vulkan backend, plus the
// validation-layer messenger. Internal to backends/vulkan/.
#pragma once

#include <memory>
#include <string>

#include "backends/vulkan/vk_loader.h"
#include "backends/vulkan/vulkan_backend.h"
#include "common/result.h"

namespace hearth::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* vk_result_name(VkResult r);

// Everything a backend needs from Vulkan; the logical device is created with it and
// destroyed with it, the instance is shared by the whole process.
struct Context {
  Fns fn;
  VkInstance instance = VK_NULL_HANDLE;  // the process-wide instance (not owned)
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memory{};
  VulkanDeviceInfo info;
  bool use_fp16 = false;               // 16-bit storage enabled: the USE_FP16 shader variants
  bool use_subgroup = false;           // subgroup arithmetic in compute: the USE_SUBGROUP variants
  VkDeviceSize max_allocation = 0;     // maxMemoryAllocationSize
  VkDeviceSize max_storage_range = 0;  // maxStorageBufferRange
  VkDeviceSize storage_align = 4;      // minStorageBufferOffsetAlignment (at least 4)

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();
};

// Creates the instance (with validation when asked or HEARTH_VK_VALIDATION=1), picks the
// device and creates the logical device with one compute queue.
Result<std::unique_ptr<Context>> create_context(const VulkanOptions& options);

}  // namespace hearth::vulkan
