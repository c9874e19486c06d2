// Which compute backends this build has, and making the one the configuration asks for.
// Shared by hearthd and hearth-run. The CPU backend is always built in; the Vulkan backend
// when CMake found the Vulkan SDK (HEARTH_VULKAN_BUILT); cuda is named so that --backend
// and --list-devices can say it is not built in.
//
// --backend auto tries cuda, then vulkan, then the cpu, and logs one line for each backend
// it passes over (not built in, no loader, no device, a device lacking a required feature).
// It does not pick a software Vulkan device (type "cpu", e.g. Mesa's llvmpipe): hearth's own
// CPU backend is faster than a software rasterizer on the same cores. --backend vulkan, or
// an explicit --vk-device, does use such a device.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::daemon {

// Whether `choice` ("auto", "cpu", "vulkan", "cuda") with Vulkan device `vk_device` (-1:
// let the backend choose) can be served by this build and machine: an error saying why not
// otherwise (not built in, no Vulkan loader, no such device, a device lacking a feature) -
// exit code 2 for the caller. Enumerates the Vulkan devices when vulkan is asked for.
Status check_backend_available(const std::string& choice, int vk_device = -1);

// Creates the backend for `choice` (auto: the best one built in, logging one line on why
// each better one was not chosen). threads: CPU worker threads, 0 = one per physical core.
// vk_device: as for check_backend_available.
Result<std::unique_ptr<Backend>> make_backend(const std::string& choice, int threads, int vk_device = -1);

// One line per device: the CPU (name, kind, memory, threads, SIMD level), every Vulkan
// device the loader reports (index, name, type, memory, API version, driver, features,
// whether hearth can use it), then one line per backend not built in. Creates (and
// destroys) the CPU backend to ask it.
std::string list_devices(int threads);

}  // namespace hearth::daemon
