// Instance creation (validation layer + debug messenger), device enumeration and choice,
// logical device creation.
#include "backends/vulkan/vk_context.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/log.h"

namespace hearth::vulkan {
namespace {

std::atomic<uint64_t> g_validation_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  const std::string msg = std::string("vulkan validation: ") + (data && data->pMessage ? data->pMessage : "?");
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    LOG_ERROR(msg);
  } else {
    LOG_WARN(msg);
  }
  g_validation_messages.fetch_add(1);
  return VK_FALSE;
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool env_validation() {
  const char* v = std::getenv("HEARTH_VK_VALIDATION");
  return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
}

VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT m{};
  m.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                  VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  m.pfnUserCallback = on_debug_message;
  return m;
}

// An instance with `fns` loaded; with the validation layer and a messenger when asked.
Result<VkInstance> make_instance(bool validation, Fns* fns, VkDebugUtilsMessengerEXT* messenger) {
  Status st = load_functions(VK_NULL_HANDLE, fns);
  if (!st) return st.error();
  std::vector<const char*> layers, extensions;
  if (validation) {
    uint32_t n = 0;
    fns->vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> props(n);
    fns->vkEnumerateInstanceLayerProperties(&n, props.data());
    const bool have = std::any_of(props.begin(), props.end(), [](const VkLayerProperties& p) {
      return std::strcmp(p.layerName, kValidationLayer) == 0;
    });
    if (have) {
      layers.push_back(kValidationLayer);
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    } else {
      LOG_WARN("vulkan: validation requested but VK_LAYER_KHRONOS_validation is not installed");
      validation = false;
    }
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "hearth";
  app.pEngineName = "hearth";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info();
  if (validation) ci.pNext = &mi;  // also reports problems of vkCreateInstance itself
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = fns->vkCreateInstance(&ci, nullptr, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return make_error("vulkan: no Vulkan driver is installed that supports Vulkan 1.2 (VK_ERROR_INCOMPATIBLE_DRIVER)");
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot create a Vulkan 1.2 instance (") + vk_result_name(r) + ")");
  st = load_functions(instance, fns);
  if (!st) {
    if (fns->vkDestroyInstance) fns->vkDestroyInstance(instance, nullptr);
    return st.error();
  }
  if (validation && messenger != nullptr && fns->vkCreateDebugUtilsMessengerEXT != nullptr)
    fns->vkCreateDebugUtilsMessengerEXT(instance, &mi, nullptr, messenger);
  return instance;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

// Lower is preferred: discrete, integrated, virtual, cpu, other.
int type_rank(const std::string& t) {
  static const char* kOrder[] = {"discrete", "integrated", "virtual", "cpu", "other"};
  for (int i = 0; i < 5; ++i)
    if (t == kOrder[i]) return i;
  return 5;
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

// The queue family with compute (preferring one without graphics), or -1.
int compute_family(const Fns& fn, VkPhysicalDevice pd) {
  uint32_t n = 0;
  fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  int best = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = static_cast<int>(i);
    if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) break;
  }
  return best;
}

VulkanDeviceInfo describe(const Fns& fn, VkPhysicalDevice pd, int index) {
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &driver;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &subgroup;
  fn.vkGetPhysicalDeviceProperties(pd, &props.properties);
  const bool v12 = props.properties.apiVersion >= VK_API_VERSION_1_2;
  if (v12) fn.vkGetPhysicalDeviceProperties2(pd, &props);

  VulkanDeviceInfo d;
  d.index = index;
  d.name = props.properties.deviceName;
  d.type = type_name(props.properties.deviceType);
  d.api_version = version_string(props.properties.apiVersion);
  if (v12) {
    d.driver = driver.driverName;
    if (driver.driverInfo[0] != '\0') d.driver += std::string(" ") + driver.driverInfo;
  }
  VkPhysicalDeviceMemoryProperties mem{};
  fn.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      d.device_local_bytes = std::max<uint64_t>(d.device_local_bytes, mem.memoryHeaps[i].size);

  if (v12) {
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f{};
    f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f.pNext = &f11;
    fn.vkGetPhysicalDeviceFeatures2(pd, &f);
    d.fp16_storage = f11.storageBuffer16BitAccess == VK_TRUE;
    d.fp16_arithmetic = f12.shaderFloat16 == VK_TRUE;
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (subgroup.supportedOperations & need) == need)
      d.subgroup_size = subgroup.subgroupSize;
  }

  if (!v12) {
    d.why_not = "Vulkan " + d.api_version + " (1.2 or newer is required)";
  } else if (compute_family(fn, pd) < 0) {
    d.why_not = "no compute queue";
  } else if (props.properties.limits.maxComputeWorkGroupInvocations < 64 ||
             props.properties.limits.maxPushConstantsSize < 96) {
    d.why_not = "compute limits below hearth's needs (64 invocations, 96 bytes of push constants)";
  } else {
    d.usable = true;
  }
  return d;
}

std::vector<VkPhysicalDevice> physical_devices(const Fns& fn, VkInstance instance) {
  uint32_t n = 0;
  fn.vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  fn.vkEnumeratePhysicalDevices(instance, &n, pds.data());
  pds.resize(n);
  return pds;
}

// The process-wide instance (one with validation, one without), created on first use and
// never destroyed: destroying an instance makes the loader unload the drivers, and Mesa's
// drivers leave a small allocation behind on every unload (LeakSanitizer reports it), so
// tests that create many backends would see one per backend.
struct SharedInstance {
  Fns fn;
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
};

Result<const SharedInstance*> shared_instance(bool validation) {
  static std::mutex mu;
  static SharedInstance* cache[2] = {nullptr, nullptr};
  std::lock_guard<std::mutex> lock(mu);
  SharedInstance*& slot = cache[validation ? 1 : 0];
  if (slot != nullptr) return slot;
  auto s = std::make_unique<SharedInstance>();
  Result<VkInstance> instance = make_instance(validation, &s->fn, &s->messenger);
  if (!instance) return instance.error();
  s->instance = *instance;
  slot = s.release();  // lives until the process exits
  return slot;
}

}  // namespace

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult error";
  }
}

Context::~Context() {
  if (device != VK_NULL_HANDLE) {
    fn.vkDeviceWaitIdle(device);
    fn.vkDestroyDevice(device, nullptr);
  }
}

Result<std::vector<VulkanDeviceInfo>> list_devices() {
  Result<const SharedInstance*> si = shared_instance(false);
  if (!si) return si.error();
  std::vector<VulkanDeviceInfo> out;
  const std::vector<VkPhysicalDevice> pds = physical_devices((*si)->fn, (*si)->instance);
  for (size_t i = 0; i < pds.size(); ++i) out.push_back(describe((*si)->fn, pds[i], static_cast<int>(i)));
  return out;
}

uint64_t validation_message_count() {
  return g_validation_messages.load();
}

Result<std::unique_ptr<Context>> create_context(const VulkanOptions& options) {
  auto ctx = std::make_unique<Context>();
  Result<const SharedInstance*> si = shared_instance(options.validation || env_validation());
  if (!si) return si.error();
  ctx->fn = (*si)->fn;
  ctx->instance = (*si)->instance;
  const Fns& fn = ctx->fn;

  const std::vector<VkPhysicalDevice> pds = physical_devices(fn, ctx->instance);
  if (pds.empty()) return make_error("vulkan: no Vulkan device found");
  std::vector<VulkanDeviceInfo> infos;
  for (size_t i = 0; i < pds.size(); ++i) infos.push_back(describe(fn, pds[i], static_cast<int>(i)));
  int chosen = -1;
  if (options.device >= 0) {
    if (options.device >= static_cast<int>(pds.size()))
      return make_error("vulkan: no device " + std::to_string(options.device) + " (there are " +
                        std::to_string(pds.size()) + ")");
    const VulkanDeviceInfo& d = infos[options.device];
    if (!d.usable)
      return make_error("vulkan: device " + std::to_string(d.index) + " (" + d.name + ") is not usable: " + d.why_not);
    chosen = options.device;
  } else {
    for (const VulkanDeviceInfo& d : infos)
      if (d.usable && (chosen < 0 || type_rank(d.type) < type_rank(infos[chosen].type))) chosen = d.index;
    if (chosen < 0)
      return make_error("vulkan: no usable Vulkan device (" + infos[0].name + ": " + infos[0].why_not + ")");
  }
  ctx->physical = pds[chosen];
  ctx->info = infos[chosen];
  fn.vkGetPhysicalDeviceProperties(ctx->physical, &ctx->props);
  fn.vkGetPhysicalDeviceMemoryProperties(ctx->physical, &ctx->memory);
  VkPhysicalDeviceMaintenance3Properties m3{};
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &m3;
  fn.vkGetPhysicalDeviceProperties2(ctx->physical, &p2);
  ctx->max_allocation = m3.maxMemoryAllocationSize;
  ctx->max_storage_range = ctx->props.limits.maxStorageBufferRange;
  ctx->storage_align = std::max<VkDeviceSize>(4, ctx->props.limits.minStorageBufferOffsetAlignment);
  // HEARTH_VK_NO_FP16=1 / HEARTH_VK_NO_SUBGROUP=1 force the fallback shader variants
  // (for testing them on devices that have the features).
  const auto env_on = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] == '1';
  };
  ctx->use_fp16 = ctx->info.fp16_storage && !env_on("HEARTH_VK_NO_FP16");
  ctx->use_subgroup = ctx->info.subgroup_size > 0 && !env_on("HEARTH_VK_NO_SUBGROUP");

  ctx->queue_family = static_cast<uint32_t>(compute_family(fn, ctx->physical));
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = ctx->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.storageBuffer16BitAccess = ctx->use_fp16 ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f11;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &features;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  const VkResult r = fn.vkCreateDevice(ctx->physical, &di, nullptr, &ctx->device);
  if (r != VK_SUCCESS)
    return make_error("vulkan: cannot create a device on " + ctx->info.name + " (" + vk_result_name(r) + ")");
  fn.vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);
  return ctx;
}

}  // namespace hearth::vulkan
