#include "backends/vulkan/vk_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace hearth::vulkan {

Result<PFN_vkGetInstanceProcAddr> open_loader() {
  static std::once_flag once;
  static PFN_vkGetInstanceProcAddr gipa = nullptr;
  std::call_once(once, [] {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr)  // never closed: function pointers may live until exit
      gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  });
  if (gipa == nullptr) return make_error("vulkan: no Vulkan loader found (libvulkan.so.1 could not be loaded)");
  return gipa;
}

Status load_functions(VkInstance instance, Fns* fns) {
  Result<PFN_vkGetInstanceProcAddr> gipa = open_loader();
  if (!gipa) return gipa.error();
  std::string missing;
#define HEARTH_VK_LOAD(name)                                          \
  fns->name = reinterpret_cast<PFN_##name>((*gipa)(instance, #name)); \
  if (fns->name == nullptr && missing.empty()) missing = #name;
  if (instance == VK_NULL_HANDLE) {
    HEARTH_VK_GLOBAL_FNS(HEARTH_VK_LOAD)
  } else {
    HEARTH_VK_INSTANCE_FNS(HEARTH_VK_LOAD)
    // Present only when VK_EXT_debug_utils was enabled.
    fns->vkCreateDebugUtilsMessengerEXT =
        reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>((*gipa)(instance, "vkCreateDebugUtilsMessengerEXT"));
    fns->vkDestroyDebugUtilsMessengerEXT =
        reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>((*gipa)(instance, "vkDestroyDebugUtilsMessengerEXT"));
  }
#undef HEARTH_VK_LOAD
  if (!missing.empty())
    return make_error("vulkan: the Vulkan loader lacks " + missing + " (Vulkan 1.2 or newer is required)");
  return {};
}

}  // namespace hearth::vulkan
