// hearth against llama.cpp on the chat models: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2:
// Q/K/V biases, NEOX RoPE base 1e6, its own Q8_0 output matrix, Q5_0/Q8_0/Q4_K/Q6_K/F32
// weights) and SmolLM2-135M-Instruct Q4_1 (llama: normal RoPE base 1e5, tied Q8_0
// embeddings, Q4_1 matrices).
//
// Golden data: tests/fixtures/{qwen2.5_coder_0.5b,smollm2_135m}_reference.json, made by
// tests/reference/make_chat_model_fixtures.py with llama-cpp-python (version, the model's
// sha256 and size, thread count recorded there). For each of 5 prompts (three ChatML chats
// with special tokens parsed, a Python completion, an English one) it holds llama.cpp's token
// ids, its 32 greedy tokens, the top-2 logit gap at each, and a sample of the logits at the
// last prompt position. The tests feed those token ids: no tokenizer is involved.
//
// Each test skips with a warning when its model file is not installed. Under AddressSanitizer
// they run the first prompt only, and teacher-force its first 8 tokens (the Release run covers
// all 5 prompts and 32 tokens).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "test_util.h"
#include "tests/model/logit_compare.h"

using hearth::InferenceContext;
using hearth::Model;
using json = nlohmann::json;
using hearth::test::argmax;
using hearth::test::eval_ok;
using hearth::test::logit_error;
using hearth::test::LogitError;
using Ids = std::vector<int32_t>;

namespace {

struct ChatModel {
  const char* fixture;  // tests/fixtures/<fixture>_reference.json
  const char* file;     // in the models folder
  const char* arch;
  // Last-prompt logits: max |ours - llama.cpp| over the stored entries and rms of the
  // difference over the every-97th sample, in units of llama.cpp's std of that vector.
  double max_tol_std, rms_tol_std;
  // A greedy token may differ from llama.cpp's only where llama.cpp's top-2 gap (logits)
  // is below near_tie, at no more than max_excused of the teacher-forced positions.
  double near_tie, max_excused;
};

// Bounds, measured on x86-64 (AVX-512) with 2 threads against llama-cpp-python 0.3.36, and
// set against llama.cpp's own spread: the fixture records, per prompt, how far llama.cpp's
// flash-attention path lands from its default path on the same logits (other kernels, other
// rounding of the same arithmetic). Both engines quantize activations to Q8_0/Q8_1/Q8_K
// before each quantized dot product but sum in other orders; layers amplify the last bits.
//
// Qwen2.5-Coder-0.5B (24 layers): ours max 0.100-0.121, rms 0.026-0.040 over the 5 prompts;
// llama.cpp against itself max 0.122-0.163, rms 0.026-0.033. Bounds at about twice that
// spread. Teacher-forced: 2 of 160 positions differ, at gaps 0.029 and 0.0085. For scale, a
// synthetic qwen2 (tests/model/synthetic_test.cpp) run without its biases is 3.2 std off,
// with the normal RoPE layout 1.3.
const ChatModel kQwen{"qwen2.5_coder_0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2", 0.3, 0.08, 0.25, 0.03};
// SmolLM2-135M (30 narrow layers, Q4_1): ours max 0.099-0.256, rms 0.033-0.119; llama.cpp
// against itself max 0.164-0.440, rms 0.036-0.169, and its flash-attention path even picks
// another top token at the end of chat_multi_turn, where its top-2 gap is 0.559 (so does
// ours since the AVX-512 attention sums q.k per key in order and has its own exp). Bounds
// just above llama.cpp's spread, the near-tie margin just above that gap. Teacher-forced:
// 5 of 160 positions differ, at gaps 0.012-0.34, so this small, noisy model gets a wider
// near-tie margin and share than Qwen.
const ChatModel kSmol{"smollm2_135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "llama", 0.5, 0.2, 0.6, 0.05};

constexpr int kThreads = 2;
constexpr size_t kAsanPrompts = 1, kAsanTokens = 8;

struct Loaded {
  std::shared_ptr<const hearth::gguf::File> file;
  std::unique_ptr<hearth::Backend> backend;
  std::unique_ptr<Model> model;
};

// The model on a 2-thread CPU backend, loaded once; nullptr when its file is not installed.
const Loaded* load(const ChatModel& cm) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(cm.file);
  if (it == cache.end()) {
    Loaded l;
    const std::string path = hearth::test::installed_model_path(cm.file);
    if (!path.empty()) {
      auto f = hearth::gguf::File::open(path);
      INFO((f.ok() ? std::string() : f.error().message));
      REQUIRE(f.ok());
      l.file = std::shared_ptr<const hearth::gguf::File>(std::move(*f));
      l.backend = hearth::cpu::make_cpu_backend({kThreads});
      auto m = Model::load(l.file, *l.backend);
      INFO((m.ok() ? std::string() : m.error().message));
      REQUIRE(m.ok());
      l.model = std::move(*m);
    }
    it = cache.emplace(cm.file, std::move(l)).first;
  }
  return it->second.model ? &it->second : nullptr;
}

const json& fixture(const ChatModel& cm) {
  static std::map<std::string, json> cache;
  auto it = cache.find(cm.fixture);
  if (it == cache.end()) {
    const std::string path = hearth::test::source_dir() + "/tests/fixtures/" + cm.fixture + "_reference.json";
    std::ifstream in(path);
    INFO(path);
    REQUIRE(in.good());
    it = cache.emplace(cm.fixture, json::parse(in)).first;
  }
  return it->second;
}

#define NEED_MODEL(m, cm)                                 \
  const Loaded* m = load(cm);                             \
  if (!m) {                                               \
    WARN((cm).file << " is not installed; test skipped"); \
    return;                                               \
  }

// The prompts a run covers: all of them, or the first under the sanitizer.
std::vector<json> prompts_of(const ChatModel& cm) {
  std::vector<json> all = fixture(cm)["prompts"].get<std::vector<json>>();
  if (hearth::test::kSanitized && all.size() > kAsanPrompts) all.resize(kAsanPrompts);
  return all;
}

std::unique_ptr<InferenceContext> new_context(const Loaded& m, hearth::DType kv_type = hearth::DType::F16) {
  hearth::ContextOptions o;
  o.n_ctx = 256;
  o.kv_type = kv_type;
  auto ctx = InferenceContext::create(*m.model, *m.backend, o);
  REQUIRE(ctx.ok());
  return std::move(*ctx);
}

std::vector<float> last_logits(const Loaded& m, const Ids& tokens) {
  auto ctx = new_context(m);
  eval_ok(*ctx, tokens);
  auto row = ctx->logits_row(0);
  return {row.begin(), row.end()};
}

// HEARTH_REFERENCE_REPORT=1 prints the measured agreement per prompt.
bool report() {
  const char* e = std::getenv("HEARTH_REFERENCE_REPORT");
  return e && *e && *e != '0';
}

void check_fixture(const ChatModel& cm) {
  const json& j = fixture(cm);
  CHECK(j["oracle"].get<std::string>().rfind("llama-cpp-python", 0) == 0);
  CHECK(j["model_file"].get<std::string>() == cm.file);
  CHECK(j["prompts"].size() == 5);
  CHECK(j["n_generated"].get<int>() == 32);
  NEED_MODEL(m, cm);
  // The installed file is the one the fixture was made from (its size; the sha256 is in
  // the fixture for a manual check), and hearth reads it as llama.cpp did.
  CHECK(std::filesystem::file_size(m->file->path()) == j["model_bytes"].get<uint64_t>());
  CHECK(m->model->config().arch == cm.arch);
  CHECK(m->model->config().n_vocab == j["n_vocab"].get<int>());
}

void check_logits(const ChatModel& cm) {
  NEED_MODEL(m, cm);
  LogitError worst{0, 0};
  for (const json& p : prompts_of(cm)) {
    const std::string name = p["name"];
    INFO(cm.fixture << " " << name);
    const std::vector<float> ours = last_logits(*m, p["tokens"].get<Ids>());
    const LogitError e = logit_error(p, ours);
    worst.max_std = std::max(worst.max_std, e.max_std);
    worst.rms_std = std::max(worst.rms_std, e.rms_std);
    if (report())
      std::printf("%s logits %-16s max|diff|/std = %.4f  rms(diff)/std = %.4f  (llama.cpp vs itself: %.4f / %.4f)\n",
                  cm.fixture, name.c_str(), e.max_std, e.rms_std, p["oracle_spread"]["max_std"].get<double>(),
                  p["oracle_spread"]["rms_std"].get<double>());
    CHECK(e.max_std <= cm.max_tol_std);
    CHECK(e.rms_std <= cm.rms_tol_std);
    // The top token itself agrees unless llama.cpp was near a tie there.
    if (argmax(ours) != p["generated"][0].get<int>()) CHECK(p["top2_gap"][0].get<double>() < cm.near_tie);
  }
  if (report())
    std::printf("%s logits worst: max %.4f (bound %.2f), rms %.4f (bound %.2f)\n", cm.fixture, worst.max_std,
                cm.max_tol_std, worst.rms_std, cm.rms_tol_std);
}

void check_teacher_forced(const ChatModel& cm) {
  NEED_MODEL(m, cm);
  int excused = 0, compared = 0;
  for (const json& p : prompts_of(cm)) {
    const std::string name = p["name"];
    const Ids prompt = p["tokens"].get<Ids>();
    Ids gen = p["generated"].get<Ids>();
    if (hearth::test::kSanitized && gen.size() > kAsanTokens) gen.resize(kAsanTokens);
    const std::vector<double> gap = p["top2_gap"].get<std::vector<double>>();
    auto ctx = new_context(*m);
    // Row 0 of the prompt's eval predicts gen[0]; row i of the second eval predicts gen[i+1].
    eval_ok(*ctx, prompt);
    Ids ours{argmax(ctx->logits_row(0))};
    eval_ok(*ctx, Ids(gen.begin(), gen.end() - 1), true);
    for (size_t i = 0; i + 1 < gen.size(); ++i) ours.push_back(argmax(ctx->logits_row(static_cast<int64_t>(i))));
    for (size_t i = 0; i < gen.size(); ++i) {
      ++compared;
      if (ours[i] == gen[i]) continue;
      INFO(cm.fixture << " " << name << " position " << i << ": ours " << ours[i] << ", llama.cpp " << gen[i]
                      << ", gap " << gap[i]);
      if (gap[i] < cm.near_tie) {
        ++excused;
        if (report())
          std::printf("%s teacher-forced %s pos %zu: near-tie excused (gap %.4f)\n", cm.fixture, name.c_str(), i,
                      gap[i]);
        continue;
      }
      CHECK(ours[i] == gen[i]);
    }
  }
  if (report()) std::printf("%s teacher-forced: %d positions, %d excused near-ties\n", cm.fixture, compared, excused);
  // Rounded up: the sanitizer's short run (8 positions) may still meet one near-tie.
  CHECK(excused <= std::ceil(cm.max_excused * compared));
}

// --kv-type q8_0 against f16, teacher-forced on llama.cpp's 32 greedy tokens of each prompt
// (tests/model/reference_test.cpp has the reasoning and the default model's figures).
void check_q8_0_kv(const ChatModel& cm, double max_tol_std, double rms_tol_std) {
  NEED_MODEL(m, cm);
  hearth::test::KvDrift drift;
  for (const json& p : prompts_of(cm)) {
    Ids gen = p["generated"].get<Ids>();
    if (hearth::test::kSanitized && gen.size() > kAsanTokens) gen.resize(kAsanTokens);
    auto f16 = new_context(*m), q8 = new_context(*m, hearth::DType::Q8_0);
    hearth::test::add_drift(hearth::test::teacher_forced_rows(*f16, p["tokens"].get<Ids>(), gen),
                            hearth::test::teacher_forced_rows(*q8, p["tokens"].get<Ids>(), gen), &drift);
  }
  if (report())
    std::printf("%s q8_0 vs f16: worst max %.4f rms %.4f; greedy differs at %d of %d, f16's gap there <= %.4f\n",
                cm.fixture, drift.max_std, drift.rms_std, drift.differ, drift.compared, drift.max_differ_gap);
  CHECK(drift.max_std <= max_tol_std);
  CHECK(drift.rms_std <= rms_tol_std);
  CHECK(drift.max_differ_gap < cm.near_tie);
  CHECK(drift.differ <= std::ceil(cm.max_excused * drift.compared));
}

}  // namespace

TEST_CASE("the Qwen2.5-Coder fixture was made by llama.cpp from the installed file", "[model][reference][qwen2]") {
  check_fixture(kQwen);
}

TEST_CASE("Qwen2.5-Coder: last-prompt logits agree with llama.cpp within tolerance", "[model][reference][qwen2]") {
  check_logits(kQwen);
}

TEST_CASE("Qwen2.5-Coder: teacher-forced greedy tokens equal llama.cpp's except at near-ties",
          "[model][reference][qwen2]") {
  check_teacher_forced(kQwen);
}

TEST_CASE("Qwen2.5-Coder: a token's logits do not depend on how the prompt was chunked", "[model][reference][qwen2]") {
  NEED_MODEL(m, kQwen);
  // Chunked prefill and prompt-cache restores rely on this; the biases must not break it.
  const Ids tokens = prompts_of(kQwen)[0]["tokens"].get<Ids>();
  const std::vector<float> whole = last_logits(*m, tokens);
  for (size_t piece : hearth::test::kSanitized ? std::vector<size_t>{13} : std::vector<size_t>{1, 7, 13}) {
    auto ctx = new_context(*m);
    for (size_t b = 0; b < tokens.size(); b += piece)
      eval_ok(*ctx, Ids(tokens.begin() + b, tokens.begin() + std::min(tokens.size(), b + piece)));
    auto row = ctx->logits_row(0);
    INFO("pieces of " << piece << " tokens");
    CHECK(std::equal(row.begin(), row.end(), whole.begin(), whole.end()));  // bitwise
  }
}

TEST_CASE("the SmolLM2 fixture was made by llama.cpp from the installed file", "[model][reference][smollm2]") {
  check_fixture(kSmol);
}

TEST_CASE("SmolLM2: last-prompt logits agree with llama.cpp within tolerance", "[model][reference][smollm2]") {
  check_logits(kSmol);
}

TEST_CASE("SmolLM2: teacher-forced greedy tokens equal llama.cpp's except at near-ties",
          "[model][reference][smollm2]") {
  check_teacher_forced(kSmol);
}

// Measured (AVX-512, 2 threads, 160 positions): q8_0 against f16 max 1.68 / rms 0.19 std,
// greedy differs at 3 positions (f16's gap there <= 0.066); f32 KV against f16, the
// yardstick of reference_test.cpp, moves only 0.28 / 0.06. Qwen's q8_0 drift is several
// times its f32 drift, unlike the other two models (likely its keys: a Q/K bias leaves
// large values in a few channels, and a block of 32 shares one scale with them); the
// greedy tokens still change at near-ties only. Bounds about 1.5x the measured drift.
TEST_CASE("Qwen2.5-Coder: a q8_0 KV cache keeps the logits and greedy tokens of f16 within its bound",
          "[model][reference][qwen2]") {
  check_q8_0_kv(kQwen, 2.5, 0.3);
}

// Measured: q8_0 max 0.57 / rms 0.22, 4 of 160 greedy changes at gaps <= 0.18; f32 KV
// against f16 0.75 / 0.34 and 9 of 160. Bounds at that yardstick's size.
TEST_CASE("SmolLM2: a q8_0 KV cache keeps the logits and greedy tokens of f16 within its bound",
          "[model][reference][smollm2]") {
  check_q8_0_kv(kSmol, 1.0, 0.5);
}
