// A device backend (Vulkan or CUDA, device_under_test.h) end to end on the default model (Gemma 3 270M Q4_K_M): the
// logits at the end of a prompt and the greedy continuation equal the CPU backend's, for three of the reference prompts
// in tests/fixtures/gemma3_reference.json (16 tokens each: lavapipe, the software device CI runs on, is slow); the same
// for one chat prompt on Qwen2.5-Coder-0.5B (qwen2, when installed; 8 tokens), and every position's logits of a
// synthetic qwen2 model. The validation layer is on and must stay silent. Under the sanitizers the Gemma test runs
// python_code only: lavapipe itself is not instrumented, and one prompt runs every op and
// hearth's host code as often as three do (the Release run keeps all three).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/device_under_test.h"
#include "backends/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "test_util.h"
#include "tests/model/logit_compare.h"
#include "tests/tools/synthetic_model.h"

namespace {

using namespace hearth;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// Logits at the last prompt position, in units of the CPU logits' standard deviation. The
// Vulkan ops agree with the CPU's within the per-op tolerances of tests/backend (activation
// rounding, f16 attention arithmetic, summation order), the same kinds of difference as
// between the CPU's own SIMD levels, which end at 0.32-0.44 std after 18 layers (see
// tests/model/reference_test.cpp). Each side differs from llama.cpp by such amounts, and
// the two differences add: measured on lavapipe against the CPU at each SIMD level,
// english_question / python_code / chat: avx512 0.17 / 0.24 / 0.40 (0.62 on chat while
// only some AVX-512 kernels followed the scalar arithmetic), avx2 0.17 / 0.27 / 0.40,
// scalar 0.19 / 0.40 / 0.38. The bound sits above that; the tight check is Vulkan against
// llama.cpp's own logits at the CPU's bound (kReferenceMaxTolStd; measured 0.24
// python_code, 0.46 chat), which a wrong RoPE base (3.4) or halved positions (0.67)
// exceed. The greedy tokens part at near-ties after 4-10 (english_question, chat) and
// agree for all 16 on python_code.
constexpr double kLogitMaxTolStd = 0.8;
constexpr double kReferenceMaxTolStd = 0.6;
// Where the greedy tokens part, the CPU's top two logits must have been closer than this
// (the near-tie margin tests/model uses against llama.cpp, measured there).
constexpr double kNearTie = 1.2;
constexpr int kTokens = 16;
constexpr int kQwenTokens = 8;
// Synthetic qwen2 with F32 weights: summation order (and the F16 KV cache's rounding,
// where the GPU may round toward zero) are the only differences left. Measured on lavapipe:
// 4.8e-6 std with its one-lane matmul, 4.8e-5 with the GPU layout (HEARTH_VK_MATMUL_LANES=32);
// a dropped bias or a wrong RoPE layout moves the logits by O(1) std.
constexpr double kSyntheticTolStd = 1e-3;
const char* const kPrompts[] = {"english_question", "python_code", "chat"};

struct Engine {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Engine load(const std::shared_ptr<const gguf::File>& file, std::unique_ptr<Backend> backend) {
  Engine e;
  e.backend = std::move(backend);
  auto m = Model::load(file, *e.backend);
  INFO((m.ok() ? std::string() : m.error().message));
  REQUIRE(m.ok());
  e.model = std::move(*m);
  return e;
}

std::unique_ptr<InferenceContext> context(const Engine& e) {
  ContextOptions o;
  o.n_ctx = 512;
  auto ctx = InferenceContext::create(*e.model, *e.backend, o);
  INFO((ctx.ok() ? std::string() : ctx.error().message));
  REQUIRE(ctx.ok());
  return std::move(*ctx);
}

// The two largest logits' indices, largest first.
std::pair<int32_t, int32_t> top2(std::span<const float> row) {
  int32_t a = 0, b = 1;
  if (row[b] > row[a]) std::swap(a, b);
  for (int32_t i = 2; i < static_cast<int32_t>(row.size()); ++i) {
    if (row[i] > row[a]) {
      b = a;
      a = i;
    } else if (row[i] > row[b]) {
      b = i;
    }
  }
  return {a, b};
}

double max_error_std(std::span<const float> cpu, std::span<const float> vk) {
  double mean = 0, var = 0, max_diff = 0;
  for (float x : cpu) mean += x;
  mean /= static_cast<double>(cpu.size());
  for (float x : cpu) var += (x - mean) * (x - mean);
  for (size_t i = 0; i < cpu.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(vk[i]) - cpu[i]));
  return max_diff / std::sqrt(var / static_cast<double>(cpu.size()));
}

// The device backend; null (with a warning) when none can run hearth.
std::unique_ptr<Backend> device_backend() {
  Result<std::unique_ptr<Backend>> be = test::make_device_under_test();
  if (!be) {
    WARN("no usable " DEVICE " device (" << be.error().message << "); test skipped");
    return nullptr;
  }
  return std::move(*be);
}

// For each named prompt of the fixture: last-prompt logits within kLogitMaxTolStd of the
// CPU's, then greedy tokens equal until the CPU's top two were within kNearTie.
void compare_greedy(const std::string& path, const std::string& fixture_name, const std::vector<std::string>& prompts,
                    int n_tokens) {
  std::unique_ptr<Backend> vk = device_backend();
  if (!vk) return;
  auto file = gguf::File::open(path);
  REQUIRE(file.ok());
  const std::shared_ptr<const gguf::File> shared(std::move(*file));
  {
    Engine cpu = load(shared, cpu::make_cpu_backend({2}));
    Engine gpu = load(shared, std::move(vk));
    std::ifstream in(test::source_dir() + "/tests/fixtures/" + fixture_name);
    REQUIRE(in.good());
    const json fixture = json::parse(in);
    for (const std::string& name : prompts) {
      const auto it = std::find_if(fixture["prompts"].begin(), fixture["prompts"].end(),
                                   [&](const json& p) { return p["name"] == name; });
      REQUIRE(it != fixture["prompts"].end());
      const Ids prompt = (*it)["tokens"].get<Ids>();
      auto cc = context(cpu), vc = context(gpu);
      test::eval_ok(*cc, prompt);
      test::eval_ok(*vc, prompt);
      const double err = max_error_std(cc->logits_row(0), vc->logits_row(0));
      INFO(name << ": last-prompt logits differ by " << err << " std");
      CHECK(err <= kLogitMaxTolStd);
      // The device on its own is as close to llama.cpp as the CPU must be (tests/model).
      const double ref_err = test::logit_error(*it, vc->logits_row(0)).max_std;
      INFO(name << ": " DEVICE "'s last-prompt logits differ from llama.cpp's by " << ref_err << " std");
      CHECK(ref_err <= kReferenceMaxTolStd);
      int same = 0;
      for (; same < n_tokens; ++same) {
        const auto [first, second] = top2(cc->logits_row(0));
        const int32_t ours = top2(vc->logits_row(0)).first;
        if (ours != first) {
          const std::span<const float> row = cc->logits_row(0);
          INFO(name << " parts at token " << same << ": cpu " << first << ", " DEVICE " " << ours << "; cpu top-2 gap "
                    << row[first] - row[second]);
          CHECK(row[first] - row[second] < kNearTie);
          break;
        }
        test::eval_ok(*cc, {first});
        test::eval_ok(*vc, {first});
      }
      std::printf(DEVICE " vs cpu %-16s %d of %d greedy tokens equal, last-prompt logits within %.3f std\n",
                  name.c_str(), same, n_tokens, err);
    }
  }
  CHECK(test::device_error_count() == 0);
}

}  // namespace

TEST_CASE("greedy generation on " DEVICE " equals the CPU's until a near-tie", "[model]" DEVICE_TAG) {
  const std::string path = test::gemma_model_path();
  if (path.empty()) {
    WARN("default model not installed; test skipped");
    return;
  }
  const std::vector<std::string> prompts = test::kSanitized
                                               ? std::vector<std::string>{"python_code"}
                                               : std::vector<std::string>(std::begin(kPrompts), std::end(kPrompts));
  compare_greedy(path, "gemma3_reference.json", prompts, kTokens);
}

TEST_CASE("Qwen2.5-Coder on " DEVICE ": greedy generation equals the CPU's until a near-tie", "[model]" DEVICE_TAG) {
  const std::string path = test::installed_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  if (path.empty()) {
    WARN("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf is not installed; test skipped");
    return;
  }
  compare_greedy(path, "qwen2.5_coder_0.5b_reference.json", {"chat_capital"}, kQwenTokens);
}

namespace {

// A synthetic model's logits at every position of a 40-token sequence, device against CPU.
void check_synthetic_equals_cpu(const std::string& arch) {
  std::unique_ptr<Backend> vk = device_backend();
  if (!vk) return;
  test::SyntheticOptions o;
  o.arch = arch;
  const std::vector<uint8_t> bytes = std::move(*test::make_synthetic_model(o));
  const std::shared_ptr<const gguf::File> file(std::move(*gguf::File::from_memory(bytes.data(), bytes.size())));
  {
    Engine cpu = load(file, cpu::make_cpu_backend({2}));
    Engine gpu = load(file, std::move(vk));
    Ids tokens{1};
    for (int32_t i = 0; i < 39; ++i) tokens.push_back(3 + (i * 97 + 11) % 317);
    auto cc = context(cpu), vc = context(gpu);
    REQUIRE(cc->eval(tokens, true).ok());
    REQUIRE(vc->eval(tokens, true).ok());
    double worst = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(tokens.size()); ++i)
      worst = std::max(worst, max_error_std(cc->logits_row(i), vc->logits_row(i)));
    std::printf(DEVICE " vs cpu synthetic %s (f32): logits within %.3g std over %zu positions\n", arch.c_str(), worst,
                tokens.size());
    CHECK(worst <= kSyntheticTolStd);
  }
  CHECK(test::device_error_count() == 0);
}

}  // namespace

TEST_CASE("a synthetic qwen2 model's logits on " DEVICE " equal the CPU's at every position", DEVICE_TAG) {
  check_synthetic_equals_cpu("qwen2");  // Q/K/V biases through AddRow, NEOX RoPE, tied output
}

TEST_CASE("a synthetic qwen3 model's logits on " DEVICE " equal the CPU's at every position", DEVICE_TAG) {
  check_synthetic_equals_cpu("qwen3");  // per-head Q/K RMSNorm, heads wider than n_embd / n_head
}
