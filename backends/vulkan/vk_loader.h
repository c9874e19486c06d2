// The Vulkan entry points the backend uses, loaded at run time from libvulkan.so.1
// (dlopen), so a hearth binary built with the backend still starts on a machine without a
// Vulkan loader and reports "no Vulkan loader" as an error instead.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "common/result.h"

namespace hearth::vulkan {

#define HEARTH_VK_GLOBAL_FNS(X)         \
  X(vkCreateInstance)                   \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define HEARTH_VK_INSTANCE_FNS(X)             \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkResetCommandBuffer)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkQueueSubmit)                            \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkWaitForFences)                          \
  X(vkResetFences)                            \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkResetDescriptorPool)                    \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkDeviceWaitIdle)

// Function pointers of one instance (instance-level ones resolved through it; device
// functions go through the loader's dispatch, valid for every device of the instance).
struct Fns {
#define HEARTH_VK_DECLARE(name) PFN_##name name = nullptr;
  HEARTH_VK_GLOBAL_FNS(HEARTH_VK_DECLARE)
  HEARTH_VK_INSTANCE_FNS(HEARTH_VK_DECLARE)
#undef HEARTH_VK_DECLARE
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

// Opens the loader once per process; the global entry points, or an error sentence.
Result<PFN_vkGetInstanceProcAddr> open_loader();

// The global functions (instance == VK_NULL_HANDLE) or all of them for `instance`.
Status load_functions(VkInstance instance, Fns* fns);

}  // namespace hearth::vulkan
