// The prompt cache on a device backend (tests/backend/device_under_test.h: Vulkan on Mesa's
// lavapipe in CI, with the validation layer; CUDA on an NVIDIA GPU): KV attached from memory
// and KV restored from chunk files into device memory give exactly the output the same
// device engine computes cold, on synthetic gemma3 (sliding-window layers), qwen2 (Q/K/V
// biases) and qwen3 (per-head Q/K norms) models; and chunk files the CPU backend wrote serve the device. Skips without
// a device. Built once per device backend (DEVICE names it).
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "backend/device_under_test.h"
#include "backends/cpu/cpu_backend.h"
#include "tests/engine/scheduler_fixture.h"

using namespace hearth;
using namespace hearth::test;

namespace {

struct DeviceFixture {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;

  bool init(const std::string& arch) {
    Result<std::unique_ptr<Backend>> b = make_device_under_test();
    if (!b) {
      WARN("no usable " DEVICE " device, skipped: " << b.error().message);
      return false;
    }
    backend = std::move(*b);
    test::SyntheticOptions o;
    o.arch = arch;
    o.type = DType::Q8_0;
    bytes = std::move(*test::make_synthetic_model(o));
    file = std::move(*gguf::File::from_memory(bytes.data(), bytes.size()));
    model = std::move(*Model::load(file, *backend));
    tok = std::move(*Tokenizer::from_gguf(*file));
    return true;
  }
};

std::string run(Scheduler& s, const GenerationRequest& r, RequestUsage* usage) {
  Collector c;
  Submitted sub = s.submit(r, c.callback());
  REQUIRE(sub.status == SubmitStatus::Accepted);
  c.handle = sub.handle;
  REQUIRE(c.wait());
  REQUIRE(c.end.kind == RequestEvent::Kind::Finished);
  *usage = c.end.usage;
  return c.text;
}

void check_cache_hit_equals_cold(const std::string& arch) {
  INFO(arch);
  DeviceFixture f;
  if (!f.init(arch)) return;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hearth-vk-cache-" + std::to_string(std::random_device{}()));
  std::mt19937 rng(9);
  GenerationRequest r;
  r.prompt.push_back(1);
  while (r.prompt.size() < 200) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 300));
  r.max_tokens = 8;
  r.sampling.temperature = 0;

  SchedulerOptions so;
  so.n_parallel = 2;
  so.n_ctx = 256;
  so.prefill_chunk = 64;
  RequestUsage u;
  std::string cold;
  {
    SchedulerOptions none = so;
    none.prefix_cache = false;
    auto s = std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, none));
    cold = run(*s, r, &u);
    CHECK(u.cached_tokens == 0);
  }
  so.model_fingerprint = "vk-test";
  {
    auto s = with_store(*f.model, *f.backend, *f.tok, so, dir);
    CHECK(run(*s, r, &u) == cold);
    CHECK(run(*s, r, &u) == cold);
    CHECK(u.cached_memory_tokens == 199);
    CHECK(s->close_cache(kHangGuard) == 0);
  }
  {
    auto s = with_store(*f.model, *f.backend, *f.tok, so, dir);
    CHECK(run(*s, r, &u) == cold);
    CHECK(u.cached_disk_tokens == 192);
  }
  // Chunk files the CPU backend wrote, restored into device memory: KV has one layout for
  // every backend. The restored KV is the CPU's arithmetic, not the device's, so the answer
  // is compared with the device's cold answer as greedy text, which on this model agrees.
  std::filesystem::remove_all(dir);
  {
    std::unique_ptr<Backend> cpu = cpu::make_cpu_backend({2});
    auto model = std::move(*Model::load(f.file, *cpu));
    auto s = with_store(*model, *cpu, *f.tok, so, dir);
    run(*s, r, &u);
    CHECK(u.cached_tokens == 0);
    CHECK(s->close_cache(kHangGuard) == 0);
  }
  {
    auto s = with_store(*f.model, *f.backend, *f.tok, so, dir);
    CHECK(run(*s, r, &u) == cold);
    CHECK(u.cached_disk_tokens == 192);
  }
  std::filesystem::remove_all(dir);
  CHECK(device_error_count() == 0);
}

}  // namespace

TEST_CASE(DEVICE ": a prompt cache hit, from memory and from disk, gives the cold output") {
  check_cache_hit_equals_cold("gemma3");
}

TEST_CASE(DEVICE ": a prompt cache hit gives the cold output on a qwen2 model (Q/K/V biases)") {
  check_cache_hit_equals_cold("qwen2");
}

TEST_CASE(DEVICE ": a prompt cache hit gives the cold output on a qwen3 model (per-head Q/K norms)") {
  check_cache_hit_equals_cold("qwen3");
}
