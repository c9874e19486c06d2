// Under LeakSanitizer, Mesa's Vulkan drivers (lavapipe in CI) leave allocations that only
// their own globals point to; when the loader unloads the driver at the last
// vkDestroyInstance those look leaked. Tests hold a DriverLeakGuard while they enumerate
// devices or create a Vulkan backend, so the allocations made meanwhile are not
// leak-checked (daemon/devices.cpp does the same for hearthd and hearth-run).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
namespace hearth::test {
using DriverLeakGuard = __lsan::ScopedDisabler;
}
#else
namespace hearth::test {
struct DriverLeakGuard {
  DriverLeakGuard() {}  // user-provided: no unused-variable warning
};
}  // namespace hearth::test
#endif
