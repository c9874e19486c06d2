#include "daemon/devices.h"

#include <unistd.h>

#include <cstdio>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/vec_dot.h"
#include "common/log.h"

namespace hearth::daemon {
namespace {

constexpr const char* kNotBuilt = "not built into this hearthd";

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

int cpu_threads(int threads) {
  return threads > 0 ? threads : cpu::physical_core_count();
}

}  // namespace

Status check_backend_available(const std::string& choice) {
  if (choice == "auto" || choice == "cpu") return {};
  if (choice == "vulkan" || choice == "cuda")
    return make_error("--backend " + choice + ": the " + choice + " backend is " + kNotBuilt +
                      " (use --backend cpu or auto)");
  return make_error("--backend " + choice + ": unknown backend (auto, cpu, vulkan, cuda)");
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& choice, int threads) {
  Status st = check_backend_available(choice);
  if (!st) return st.error();
  if (choice == "auto")
    LOG_INFO(std::string("backend auto: cuda ") + kNotBuilt + ", vulkan " + kNotBuilt + ": using cpu");
  cpu::CpuBackendOptions o;
  o.n_threads = cpu_threads(threads);
  return cpu::make_cpu_backend(o);
}

std::string list_devices(int threads) {
  cpu::CpuBackendOptions o;
  o.n_threads = cpu_threads(threads);
  std::unique_ptr<Backend> cpu = cpu::make_cpu_backend(o);
  const DeviceInfo d = cpu->info();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const std::string memory = d.memory_bytes > 0 ? gib(static_cast<double>(d.memory_bytes))
                                                : "host " + gib(static_cast<double>(pages) * static_cast<double>(page));
  std::string out = "cpu: " + d.name + "; type " + d.kind + "; memory " + memory + "; threads " +
                    std::to_string(o.n_threads) + "; simd " + cpu::simd_level_name(cpu::active_simd_level()) + "\n";
  out += std::string("vulkan: ") + kNotBuilt + "\n";
  out += std::string("cuda: ") + kNotBuilt + "\n";
  return out;
}

}  // namespace hearth::daemon
