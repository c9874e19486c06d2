// hearthd's Vulkan flags as a process: --list-devices names every device the loader
// reports, --backend vulkan serves on the synthetic model, a --vk-device that does not
// exist is a configuration error (exit 2), and --backend auto passes over a software Vulkan
// device with one log line. Built only with the Vulkan backend (HEARTH_VULKAN_BUILT).
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "daemon_harness.h"
#include "device/driver_leak_guard.h"

namespace {

using namespace hearth::test;
using namespace std::chrono_literals;

// hearthd on the synthetic model with `backend_args`; whether it became healthy, and its log.
struct Served {
  bool healthy = false;
  std::string log;
  int completion_status = 0;
};

Served serve(const std::vector<std::string>& backend_args) {
  TempDir dir;
  SpawnOptions o;
  const std::string socket = dir.file("h.sock");
  o.args = {"--model",        write_synthetic_model(dir.path()), "--socket", socket, "--threads", "1", "--cache-dir",
            dir.file("cache")};
  o.args.insert(o.args.end(), backend_args.begin(), backend_args.end());
  o.env = clean_env();
  o.stderr_path = dir.file("stderr.log");
  Served s;
  {
    Process p(o);
    auto health = [&] { return http_request(socket, "GET", "/health").status == 200; };
    s.healthy = wait_until([&] { return health() || !p.running(); }) && p.running();
    if (s.healthy)
      s.completion_status = http_request(socket, "POST", "/v1/completions",
                                         "{\"prompt\": \"hello\", \"max_tokens\": 4, \"temperature\": 0}")
                                .status;
    p.signal(SIGTERM);
    p.wait_exit();
  }
  s.log = read_file(o.stderr_path);
  return s;
}

// The Vulkan devices hearth can use, or empty (the tests that need one skip).
std::vector<hearth::vulkan::VulkanDeviceInfo> usable_devices() {
  std::vector<hearth::vulkan::VulkanDeviceInfo> out;
  DriverLeakGuard guard;
  if (auto devices = hearth::vulkan::list_devices())
    for (const auto& d : *devices)
      if (d.usable) out.push_back(d);
  return out;
}

}  // namespace

TEST_CASE("hearthd --list-devices lists every Vulkan device with type, memory and features", "[daemon][vulkan]") {
  RunResult r = run_hearthd({"--list-devices", "--threads", "1"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("cpu: "));
  auto devices = [] {
    DriverLeakGuard guard;
    return hearth::vulkan::list_devices();
  }();
  if (!devices) {
    CHECK_THAT(r.out, Catch::Contains(devices.error().message));
    return;
  }
  for (const auto& d : *devices) {
    INFO(r.out);
    CHECK_THAT(r.out, Catch::Contains("vulkan " + std::to_string(d.index) + ": " + d.name + "; type " + d.type +
                                      "; memory ") &&
                          Catch::Contains("fp16 storage ") && Catch::Contains("subgroup "));
  }
}

TEST_CASE("hearthd --backend vulkan --vk-device 99 exits 2 naming the device", "[daemon][vulkan]") {
  TempDir dir;
  // A model that does not exist: the device is checked before the model is loaded.
  RunResult r = run_hearthd(
      {"--socket", dir.file("s"), "--model", dir.file("none.gguf"), "--backend", "vulkan", "--vk-device", "99"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--vk-device 99") && Catch::Contains("no such Vulkan device"));
}

TEST_CASE("hearthd --backend vulkan serves on the Vulkan device", "[daemon][vulkan]") {
  if (usable_devices().empty()) {
    WARN("no usable Vulkan device; test skipped");
    return;
  }
  Served s = serve({"--backend", "vulkan"});
  INFO(s.log);
  CHECK(s.healthy);
  CHECK(s.completion_status == 200);
}

TEST_CASE("hearthd --backend auto passes over a software Vulkan device with one log line", "[daemon][vulkan]") {
  const auto usable = usable_devices();
  bool hardware = false;
  for (const auto& d : usable) hardware = hardware || d.type != "cpu";
  if (usable.empty() || hardware) {
    WARN("no usable software-only Vulkan setup here (needs e.g. lavapipe alone); test skipped");
    return;
  }
  Served s = serve({"--backend", "auto"});
  INFO(s.log);
  CHECK(s.healthy);
  CHECK_THAT(s.log, Catch::Contains("software device") && Catch::Contains("backend auto: using cpu"));
  // One line for vulkan: the reason names the device once.
  const std::string line = "backend auto: vulkan not used";
  CHECK(s.log.find(line) != std::string::npos);
  CHECK(s.log.find(line) == s.log.rfind(line));
}
