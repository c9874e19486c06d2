// Which compute backends this build has, and making the one the configuration asks for.
// Shared by hearthd and hearth-run. The CPU backend is always built in; the Vulkan backend
// when CMake found the Vulkan SDK (HEARTH_VULKAN_BUILT), the CUDA backend when it found the
// CUDA toolkit (HEARTH_CUDA_BUILT); --backend and --list-devices say which are not built in.
//
// --backend auto tries cuda, then vulkan, then the cpu, and logs one line for each backend
// it passes over (not built in, no driver or loader, no device, a device lacking a required
// feature). An explicit --cuda-device or --vk-device is the only device auto tries for that
// backend. It does not pick a software Vulkan device (type "cpu", e.g. Mesa's llvmpipe):
// hearth's own CPU backend is faster than a software rasterizer on the same cores.
// --backend vulkan, or an explicit --vk-device, does use such a device.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::daemon {

// What --backend, --threads, --vk-device and --cuda-device ask for.
struct BackendChoice {
  std::string backend = "auto";  // "auto", "cpu", "vulkan", "cuda"
  int threads = 0;               // CPU worker threads; 0 = one per physical core
  int vk_device = -1;            // Vulkan device index (--list-devices); -1 = let the backend choose
  int cuda_device = -1;          // CUDA device index (--list-devices); -1 = let the backend choose
};

// Whether `choice` can be served by this build and machine: an error saying why not
// otherwise (not built in, no driver or Vulkan loader, no such device, a device lacking a
// feature) - exit code 2 for the caller. Enumerates the devices of the backend asked for.
// A device index for a backend other than choice.backend is not checked.
Status check_backend_available(const BackendChoice& choice);

// Creates the backend `choice` asks for (auto: the best one built in, logging one line on
// why each better one was not chosen).
Result<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice);

// One line per device: the CPU (name, kind, memory, threads, SIMD level), every Vulkan
// device the loader reports (index, name, type, memory, API version, driver, features,
// whether hearth can use it), then one line per backend not built in. Creates (and
// destroys) the CPU backend to ask it.
std::string list_devices(int threads);

}  // namespace hearth::daemon
