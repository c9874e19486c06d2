// The Vulkan compute backend: weights in device-local memory, the KV block pool in device
// memory, one command buffer per forward pass (Backend::execute). Shaders are GLSL
// compiled to SPIR-V by glslc at build time and embedded in the binary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::vulkan {

struct VulkanDeviceInfo {
  int index = 0;                    // the value --vk-device takes
  std::string name;                 // VkPhysicalDeviceProperties::deviceName
  std::string type;                 // "discrete", "integrated", "virtual", "cpu", "other"
  std::string api_version;          // e.g. "1.3.230"
  std::string driver;               // driver name and info, when the device reports them
  uint64_t device_local_bytes = 0;  // largest device-local heap
  bool fp16_storage = false;        // 16-bit storage buffer access
  bool fp16_arithmetic = false;     // shaderFloat16
  uint32_t subgroup_size = 0;       // 0 when subgroup arithmetic is not available to compute
  bool usable = false;              // has everything hearth requires
  std::string why_not;              // when !usable: the missing feature
};

// Every physical device the Vulkan loader reports. An error (one clear sentence) when there
// is no loader or no instance can be created.
Result<std::vector<VulkanDeviceInfo>> list_devices();

struct VulkanOptions {
  int device = -1;          // index into list_devices(); -1: the first usable one,
                            // discrete before integrated before virtual/cpu
  bool validation = false;  // enable VK_LAYER_KHRONOS_validation (also HEARTH_VK_VALIDATION=1)
};

// An error (one sentence) when there is no loader, no usable device, or the chosen device
// lacks a required feature.
Result<std::unique_ptr<Backend>> make_vulkan_backend(const VulkanOptions& options);

// Validation messages (warnings and errors) reported since the backend was created, for
// tests that require zero. Counted across all Vulkan backends of the process.
uint64_t validation_message_count();

}  // namespace hearth::vulkan
