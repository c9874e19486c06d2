#include "daemon/devices.h"

#include <unistd.h>

#include <cstdio>
#include <string_view>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/vec_dot.h"
#include "common/log.h"
#ifdef HEARTH_VULKAN_BUILT
#include "backends/vulkan/vulkan_backend.h"
#endif
#ifdef HEARTH_CUDA_BUILT
#include "backends/cuda/cuda_backend.h"
#endif
#if defined(HEARTH_VULKAN_BUILT) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace hearth::daemon {
namespace {

constexpr const char* kNotBuilt = "not built in";

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

int cpu_threads(int threads) {
  return threads > 0 ? threads : cpu::physical_core_count();
}

// "0 llvmpipe (LLVM 15.0.7, 256 bits)", "0 NVIDIA H200": how log lines and errors name a
// device (a VulkanDeviceInfo or a CudaDeviceInfo).
template <class Info>
std::string device_label(const Info& d) {
  return std::to_string(d.index) + " " + d.name;
}

template <class Info>
std::string device_names(const std::vector<Info>& devices) {
  std::string out;
  for (const Info& d : devices) out += (out.empty() ? "" : ", ") + device_label(d);
  return out.empty() ? "none" : out;
}

// The device `flag` (--vk-device, --cuda-device) names among the `api` ("Vulkan", "CUDA")
// devices, or an error saying there is no such device or it cannot be used.
template <class Info>
Result<Info> named_device(const std::vector<Info>& devices, int index, const std::string& flag,
                          const std::string& api) {
  for (const Info& d : devices) {
    if (d.index != index) continue;
    if (!d.usable)
      return make_error(flag + " " + std::to_string(index) + ": " + api + " device " + device_label(d) +
                        " cannot run hearth: " + d.why_not);
    return d;
  }
  return make_error(flag + " " + std::to_string(index) + ": no such " + api + " device (this machine has " +
                    std::to_string(devices.size()) + ": " + device_names(devices) + "; see --list-devices)");
}

std::unique_ptr<Backend> make_cpu(int threads) {
  cpu::CpuBackendOptions o;
  o.n_threads = cpu_threads(threads);
  return cpu::make_cpu_backend(o);
}

#ifdef HEARTH_VULKAN_BUILT

// Mesa's Vulkan drivers (lavapipe) leave allocations that only their own globals point to;
// when the loader unloads the driver at the last vkDestroyInstance, LeakSanitizer calls
// them leaks and fails the process at exit. In sanitizer builds the calls into the loader
// below hold this guard, so what is allocated meanwhile is not leak-checked.
#if defined(__SANITIZE_ADDRESS__)
using DriverLeakGuard = __lsan::ScopedDisabler;
#else
struct DriverLeakGuard {
  DriverLeakGuard() {}  // user-provided: no unused-variable warning
};
#endif

Result<std::vector<vulkan::VulkanDeviceInfo>> enumerate() {
  DriverLeakGuard guard;
  return vulkan::list_devices();
}

// Lower is preferred by auto: discrete, integrated, virtual, other; software never.
int type_rank(const std::string& type) {
  if (type == "discrete") return 0;
  if (type == "integrated") return 1;
  if (type == "virtual") return 2;
  return 3;
}

// The backend's error without its own "vulkan: " prefix (our lines name vulkan already).
std::string reason(const Error& e) {
  constexpr std::string_view kPrefix = "vulkan: ";
  return e.message.rfind(kPrefix, 0) == 0 ? e.message.substr(kPrefix.size()) : e.message;
}

Result<vulkan::VulkanDeviceInfo> explicit_device(const std::vector<vulkan::VulkanDeviceInfo>& devices, int index) {
  return named_device(devices, index, "--vk-device", "Vulkan");
}

Status check_vulkan(int vk_device) {
  Result<std::vector<vulkan::VulkanDeviceInfo>> devices = enumerate();
  if (!devices) return make_error("--backend vulkan: " + reason(devices.error()));
  if (vk_device >= 0) {
    Result<vulkan::VulkanDeviceInfo> d = explicit_device(*devices, vk_device);
    if (!d) return d.error();
    return {};
  }
  for (const vulkan::VulkanDeviceInfo& d : *devices)
    if (d.usable) return {};
  std::string why;
  for (const vulkan::VulkanDeviceInfo& d : *devices) why += "; " + device_label(d) + ": " + d.why_not;
  return make_error("--backend vulkan: no Vulkan device can run hearth (" + std::to_string(devices->size()) + " found" +
                    why + ")");
}

Result<std::unique_ptr<Backend>> make_vulkan(int vk_device) {
  vulkan::VulkanOptions o;
  o.device = vk_device;
  DriverLeakGuard guard;
  return vulkan::make_vulkan_backend(o);
}

// auto's Vulkan step: a backend on the best hardware device, or null after one log line
// saying why Vulkan was passed over.
std::unique_ptr<Backend> try_vulkan_for_auto(int vk_device) {
  Result<std::vector<vulkan::VulkanDeviceInfo>> devices = enumerate();
  if (!devices) {
    LOG_INFO("backend auto: vulkan not used: " + reason(devices.error()));
    return nullptr;
  }
  const vulkan::VulkanDeviceInfo* best = nullptr;
  if (vk_device >= 0) {
    // An explicit --vk-device is honoured, a software device included.
    for (const vulkan::VulkanDeviceInfo& d : *devices)
      if (d.index == vk_device) best = &d;
    if (best == nullptr || !best->usable) {
      Result<vulkan::VulkanDeviceInfo> e = explicit_device(*devices, vk_device);
      LOG_INFO("backend auto: vulkan not used: " + e.error().message);
      return nullptr;
    }
  } else {
    std::string skipped;
    for (const vulkan::VulkanDeviceInfo& d : *devices) {
      if (!d.usable) {
        skipped += "; " + device_label(d) + " lacks " + d.why_not;
      } else if (d.type == "cpu") {
        skipped += "; " + device_label(d) + " is a software device, slower than the cpu backend on the same cores" +
                   " (--backend vulkan uses it)";
      } else if (best == nullptr || type_rank(d.type) < type_rank(best->type)) {
        best = &d;
      }
    }
    if (best == nullptr) {
      LOG_INFO("backend auto: vulkan not used: " +
               (devices->empty() ? std::string("the loader reports no device") : skipped.substr(2)));
      return nullptr;
    }
  }
  Result<std::unique_ptr<Backend>> be = make_vulkan(best->index);
  if (!be) {
    LOG_INFO("backend auto: vulkan device " + device_label(*best) + " failed: " + reason(be.error()));
    return nullptr;
  }
  LOG_INFO("backend auto: using vulkan device " + device_label(*best) + " (" + best->type + ")");
  return std::move(*be);
}

std::string yes_no(bool b) {
  return b ? "yes" : "no";
}

std::string vulkan_lines() {
  Result<std::vector<vulkan::VulkanDeviceInfo>> devices = enumerate();
  if (!devices) return "vulkan: " + reason(devices.error()) + "\n";
  if (devices->empty()) return "vulkan: the loader reports no device\n";
  std::string out;
  for (const vulkan::VulkanDeviceInfo& d : *devices) {
    out += "vulkan " + std::to_string(d.index) + ": " + d.name + "; type " + d.type + "; memory " +
           gib(static_cast<double>(d.device_local_bytes)) + "; api " + d.api_version;
    if (!d.driver.empty()) out += "; driver " + d.driver;
    out += "; fp16 storage " + yes_no(d.fp16_storage) + "; fp16 arithmetic " + yes_no(d.fp16_arithmetic) +
           "; subgroup " + (d.subgroup_size > 0 ? std::to_string(d.subgroup_size) : std::string("none"));
    if (!d.usable) {
      out += "; not usable: " + d.why_not;
    } else {
      out += d.type == "cpu" ? "; usable (--backend vulkan; auto prefers the cpu backend)" : "; usable";
    }
    out += "\n";
  }
  return out;
}

#endif  // HEARTH_VULKAN_BUILT

#ifdef HEARTH_CUDA_BUILT

// The backend's error without its own "cuda: " prefix.
std::string cuda_reason(const Error& e) {
  constexpr std::string_view kPrefix = "cuda: ";
  return e.message.rfind(kPrefix, 0) == 0 ? e.message.substr(kPrefix.size()) : e.message;
}

Result<cuda::CudaDeviceInfo> explicit_cuda_device(const std::vector<cuda::CudaDeviceInfo>& devices, int index) {
  return named_device(devices, index, "--cuda-device", "CUDA");
}

Status check_cuda(int cuda_device) {
  Result<std::vector<cuda::CudaDeviceInfo>> devices = cuda::list_devices();
  if (!devices) return make_error("--backend cuda: " + cuda_reason(devices.error()));
  if (cuda_device >= 0) {
    Result<cuda::CudaDeviceInfo> d = explicit_cuda_device(*devices, cuda_device);
    if (!d) return d.error();
    return {};
  }
  for (const cuda::CudaDeviceInfo& d : *devices)
    if (d.usable) return {};
  std::string why;
  for (const cuda::CudaDeviceInfo& d : *devices) why += "; " + device_label(d) + ": " + d.why_not;
  return make_error("--backend cuda: no CUDA device can run hearth (" + std::to_string(devices->size()) + " found" +
                    why + ")");
}

Result<std::unique_ptr<Backend>> make_cuda(int cuda_device) {
  cuda::CudaOptions o;
  o.device = cuda_device;
  return cuda::make_cuda_backend(o);
}

// auto's CUDA step: a backend on the device --cuda-device names, else on the usable device
// with the most memory, or null after one log line saying why CUDA was passed over.
std::unique_ptr<Backend> try_cuda_for_auto(int cuda_device) {
  if (cuda_device >= 0) {
    Result<std::vector<cuda::CudaDeviceInfo>> devices = cuda::list_devices();
    if (!devices) {
      LOG_INFO("backend auto: cuda not used: " + cuda_reason(devices.error()));
      return nullptr;
    }
    Result<cuda::CudaDeviceInfo> d = explicit_cuda_device(*devices, cuda_device);
    if (!d) {
      LOG_INFO("backend auto: cuda not used: " + d.error().message);
      return nullptr;
    }
  }
  Result<std::unique_ptr<Backend>> be = make_cuda(cuda_device);
  if (!be) {
    LOG_INFO("backend auto: cuda not used: " + cuda_reason(be.error()));
    return nullptr;
  }
  LOG_INFO("backend auto: using " + (*be)->info().name);
  return std::move(*be);
}

std::string cuda_lines() {
  Result<std::vector<cuda::CudaDeviceInfo>> devices = cuda::list_devices();
  if (!devices) return "cuda: " + cuda_reason(devices.error()) + "\n";
  if (devices->empty()) return "cuda: the NVIDIA driver reports no CUDA device\n";
  std::string out;
  for (const cuda::CudaDeviceInfo& d : *devices) {
    out += "cuda " + std::to_string(d.index) + ": " + d.name + "; compute capability " + std::to_string(d.cc_major) +
           "." + std::to_string(d.cc_minor) + "; memory " + gib(static_cast<double>(d.memory_bytes)) + " (" +
           gib(static_cast<double>(d.free_bytes)) + " free); multiprocessors " + std::to_string(d.multiprocessors) +
           "; driver CUDA " + d.driver_version + "; runtime CUDA " + d.runtime_version;
    out += d.usable ? "; usable\n" : "; not usable: " + d.why_not + "\n";
  }
  return out;
}

#endif  // HEARTH_CUDA_BUILT

}  // namespace

Status check_backend_available(const BackendChoice& choice) {
  const std::string& name = choice.backend;
  if (name == "auto" || name == "cpu") return {};
#ifdef HEARTH_CUDA_BUILT
  if (name == "cuda") return check_cuda(choice.cuda_device);
#endif
#ifdef HEARTH_VULKAN_BUILT
  if (name == "vulkan") return check_vulkan(choice.vk_device);
#endif
  if (name == "vulkan" || name == "cuda")
    return make_error("--backend " + name + ": the " + name + " backend is " + kNotBuilt +
                      " (use --backend cpu or auto)");
  return make_error("--backend " + name + ": unknown backend (auto, cpu, vulkan, cuda)");
}

Result<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice) {
  Status st = check_backend_available(choice);
  if (!st) return st.error();
  const std::string& name = choice.backend;
#ifdef HEARTH_CUDA_BUILT
  if (name == "cuda") return make_cuda(choice.cuda_device);
  if (name == "auto")
    if (std::unique_ptr<Backend> be = try_cuda_for_auto(choice.cuda_device)) return be;
#else
  if (name == "auto") LOG_INFO(std::string("backend auto: cuda ") + kNotBuilt);
#endif
#ifdef HEARTH_VULKAN_BUILT
  if (name == "vulkan") return make_vulkan(choice.vk_device);
  if (name == "auto")
    if (std::unique_ptr<Backend> be = try_vulkan_for_auto(choice.vk_device)) return be;
#else
  if (name == "auto") LOG_INFO(std::string("backend auto: vulkan ") + kNotBuilt);
#endif
  if (name == "auto") LOG_INFO("backend auto: using cpu");
  return make_cpu(choice.threads);
}

std::string list_devices(int threads) {
  std::unique_ptr<Backend> cpu = make_cpu(threads);
  const DeviceInfo d = cpu->info();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const std::string memory = d.memory_bytes > 0 ? gib(static_cast<double>(d.memory_bytes))
                                                : "host " + gib(static_cast<double>(pages) * static_cast<double>(page));
  std::string out = "cpu: " + d.name + "; type " + d.kind + "; memory " + memory + "; threads " +
                    std::to_string(cpu_threads(threads)) + "; simd " + cpu::simd_level_name(cpu::active_simd_level()) +
                    "\n";
#ifdef HEARTH_VULKAN_BUILT
  out += vulkan_lines();
#else
  out += std::string("vulkan: ") + kNotBuilt + "\n";
#endif
#ifdef HEARTH_CUDA_BUILT
  out += cuda_lines();
#else
  out += std::string("cuda: ") + kNotBuilt + "\n";
#endif
  return out;
}

}  // namespace hearth::daemon
