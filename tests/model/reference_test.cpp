// hearth against llama.cpp on the default model (Gemma 3 270M Q4_K_M).
//
// Golden data: tests/fixtures/gemma3_reference.json, made by tests/reference/make_fixtures.py
// with llama-cpp-python (version, model sha256 and thread count are recorded in the file).
// For each of 15 prompts it holds llama.cpp's token ids, its 64 greedy tokens, the top-2
// logit gap at each generated position, and a sample of the logits at the last prompt
// position (the 256 largest and every 97th vocabulary entry) with their mean and std.
//
// Tolerances (measured on x86-64 with 2 threads; see the constants): both engines quantize
// activations to Q8_K before every Q4_K/Q6_K dot product, but they round intermediate values
// differently and sum in different orders, and 18 layers amplify those differences into the
// logits. The bounds are set from llama.cpp's own spread between two of its code paths.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/vec_dot.h"
#include "engine/gguf/gguf.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tests/model/logit_compare.h"

using hearth::InferenceContext;
using hearth::Model;
using hearth::Tokenizer;
using json = nlohmann::json;
using hearth::test::argmax;
using hearth::test::eval_ok;
using hearth::test::logit_error;
using hearth::test::LogitError;
using Ids = std::vector<int32_t>;

namespace {

// Logits at the last prompt position, in units of llama.cpp's standard deviation of that
// logit vector (3-5 logits here). Measured over the 15 prompts, at each SIMD level (scalar,
// AVX2, AVX-512) and across a day of engine changes: max |ours - llama.cpp| over the stored
// entries <= 0.43 (c_code), rms of the difference over the every-97th sample <= 0.15
// (chinese). That is llama.cpp's own spread: its flash-attention path differs from its
// default path by max 0.21-0.55 and rms 0.04-0.09 on the same prompts, and our SIMD levels
// differ from each other by 0.32-0.44 / 0.09-0.15 (F16 rounding, GELU tables, summation
// order, Q8_K activation rounding, amplified through 18 layers). Bounds sit just above that
// because subtle bugs are not much louder: llama.cpp run with a wrong RoPE base (1e4 instead
// of 1e6, global layers only) lands at max/rms up to 3.4/1.5 (chat); with RoPE positions
// scaled by 0.5, up to 0.67/0.24 (chat) - caught by the max bound, just. The synthetic-model
// test (synthetic_test.cpp) checks the same ops with F32 weights 50x more tightly.
constexpr double kLogitMaxTolStd = 0.6;
constexpr double kLogitRmsTolStd = 0.25;

// A greedy token may differ from llama.cpp's only where llama.cpp's top-2 gap (logits) is
// below this. Measured: we differ at 12-17 of 960 teacher-forced positions depending on
// the SIMD level, at gaps <= 0.26, except c_code position 4 (gap 0.956), where our AVX2 and
// scalar levels and llama.cpp's own flash-attention path all pick <eos> instead. AVX2 went
// from 15 to 22 (Zen 3) when its Q4_K kernel took the scalar arithmetic, while its last-
// prompt logits moved closer to llama.cpp's (worst rms 0.17 -> 0.10 std). Excusing more
// than 3% of the positions would hide a bug.
constexpr double kNearTie = 1.2;
constexpr double kMaxExcusedFraction = 0.03;

// q8_0 KV against f16 KV (the last test), logits at all 64 teacher-forced positions of the
// 15 prompts, in units of the f16 row's std, worst position. Measured (AVX-512, 2 threads):
// max 0.88 / rms 0.38 (c_code); greedy differs at 14 of 960 positions, each where f16's
// top-2 gap is <= 0.40. The yardstick is f32 KV against f16 KV, where every stored value
// is closer, yet measured max 1.22 / rms 0.56 and 12 of 960 at gaps <= 0.24: single
// positions near a tie amplify any change of the KV, so q8_0 is bounded by what a
// lossless-er type already moves, not by zero. What a bug looks like: every dequantized K
// and V element 5% too large gives max 1.71 / rms 0.77 (caught), 20% gives 4.9 / 3.0 and 28
// greedy changes; a wrong block scale or byte offset is far louder. 2% (1.07 / 0.37) is
// below the noise and not caught.
constexpr double kQ8LogitMaxTolStd = 1.5;
constexpr double kQ8LogitRmsTolStd = 0.6;
constexpr double kQ8NearTie = 1.0;
constexpr double kQ8MaxDifferFraction = 0.03;
// The sanitizer's run compares only the first 8 generated positions of each prompt (120),
// and near-ties crowd there: measured 4 of those 120 at AVX-512 and 8 at AVX2 (Zen 3,
// Release; the first 240 give 13 and all 960 give 18, each at an f16 gap <= 0.44; 5 of 120
// once AVX2's Q4_K kept the scalar arithmetic), so 3% of them is no bound on a short run.
// It gets 10%; the gap and logit bounds are unchanged.
constexpr double kQ8ShortRunDifferFraction = 0.10;

constexpr int kThreads = 2;

struct Loaded {
  std::shared_ptr<const hearth::gguf::File> file;
  std::unique_ptr<hearth::Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load_with(const std::string& path, int n_threads) {
  Loaded l;
  auto f = hearth::gguf::File::open(path);
  INFO((f.ok() ? std::string() : f.error().message));
  REQUIRE(f.ok());
  l.file = std::shared_ptr<const hearth::gguf::File>(std::move(*f));
  l.backend = hearth::cpu::make_cpu_backend({n_threads});
  auto m = Model::load(l.file, *l.backend);
  INFO((m.ok() ? std::string() : m.error().message));
  REQUIRE(m.ok());
  l.model = std::move(*m);
  auto t = Tokenizer::from_gguf(*l.file);
  REQUIRE(t.ok());
  l.tok = std::move(*t);
  return l;
}

// The default model with 2 threads, loaded once; nullptr when it is not installed.
const Loaded* default_model() {
  static Loaded l;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::string path = hearth::test::gemma_model_path();
    if (path.empty()) return nullptr;
    l = load_with(path, kThreads);
  }
  return l.model ? &l : nullptr;
}

const json& fixture() {
  static json j = [] {
    std::string path = hearth::test::source_dir() + "/tests/fixtures/gemma3_reference.json";
    std::ifstream in(path);
    INFO(path);
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return j;
}

#define NEED_MODEL(m)                                  \
  const Loaded* m = default_model();                   \
  if (!m) {                                            \
    WARN("default model not installed; test skipped"); \
    return;                                            \
  }

std::unique_ptr<InferenceContext> new_context(const Loaded& m, int32_t n_ctx = 1024,
                                              hearth::DType kv_type = hearth::DType::F16) {
  hearth::ContextOptions o;
  o.n_ctx = n_ctx;
  o.kv_type = kv_type;
  auto ctx = InferenceContext::create(*m.model, *m.backend, o);
  REQUIRE(ctx.ok());
  return std::move(*ctx);
}

Ids ids_of(const json& a) {
  return a.get<Ids>();
}

double stddev(std::span<const float> v) {
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (float x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size()));
}

// max |a - b| / std(b) over full vectors.
double vector_error_std(std::span<const float> a, std::span<const float> b) {
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(double(a[i]) - b[i]));
  return max_diff / stddev(b);
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

}  // namespace

TEST_CASE("the fixture was made from the default model with llama.cpp", "[model][reference]") {
  const json& j = fixture();
  CHECK(j["prompts"].size() >= 12);
  CHECK(j["n_generated"].get<int>() == 64);
  CHECK(j["oracle"].get<std::string>().rfind("llama-cpp-python", 0) == 0);
  NEED_MODEL(m);
  CHECK(m->model->config().n_vocab == j["n_vocab"].get<int>());
}

TEST_CASE("token ids equal llama.cpp's for every reference prompt", "[model][reference]") {
  NEED_MODEL(m);
  for (const json& p : fixture()["prompts"]) {
    const std::string name = p["name"];
    INFO(name);
    Ids ours = m->tok->encode(p["text"].get<std::string>(), p["add_bos"].get<bool>(), p["parse_special"].get<bool>());
    CHECK(ours == ids_of(p["tokens"]));
  }
}

TEST_CASE("a chat rendered by render_chat tokenizes to llama.cpp's ids", "[model][reference]") {
  NEED_MODEL(m);
  const json* chat = nullptr;
  for (const json& p : fixture()["prompts"])
    if (p["name"] == "chat") chat = &p;
  REQUIRE(chat != nullptr);
  std::vector<hearth::ChatMessage> messages;
  for (const json& msg : (*chat)["chat_messages"])
    messages.push_back({msg["role"].get<std::string>(), msg["content"].get<std::string>()});
  auto segments = hearth::render_chat(hearth::ChatFamily::Gemma, messages, true);
  REQUIRE(segments.ok());
  CHECK(hearth::join_segments(*segments) == (*chat)["text"].get<std::string>());
  CHECK(m->tok->encode_segments(*segments) == ids_of((*chat)["tokens"]));
}

TEST_CASE("last-prompt logits agree with llama.cpp within tolerance", "[model][reference]") {
  NEED_MODEL(m);
  LogitError worst{0, 0};
  for (const json& p : fixture()["prompts"]) {
    const std::string name = p["name"];
    INFO(name);
    std::vector<float> ours = last_logits(*m, ids_of(p["tokens"]));
    LogitError e = logit_error(p, ours);
    worst.max_std = std::max(worst.max_std, e.max_std);
    worst.rms_std = std::max(worst.rms_std, e.rms_std);
    if (report())
      std::printf("logits %-18s max|diff|/std = %.4f  rms(diff)/std = %.4f\n", name.c_str(), e.max_std, e.rms_std);
    CHECK(e.max_std <= kLogitMaxTolStd);
    CHECK(e.rms_std <= kLogitRmsTolStd);
  }
  if (report())
    std::printf("logits worst: max %.4f (bound %.2f), rms %.4f (bound %.2f)\n", worst.max_std, kLogitMaxTolStd,
                worst.rms_std, kLogitRmsTolStd);
}

TEST_CASE("teacher-forced greedy tokens equal llama.cpp's except at near-ties", "[model][reference]") {
  NEED_MODEL(m);
  int excused = 0, compared = 0;
  for (const json& p : fixture()["prompts"]) {
    const std::string name = p["name"];
    const Ids prompt = ids_of(p["tokens"]);
    const Ids gen = ids_of(p["generated"]);
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
      INFO(name << " position " << i << ": ours " << ours[i] << ", llama.cpp " << gen[i] << ", gap " << gap[i]);
      if (gap[i] < kNearTie) {
        ++excused;
        if (report()) std::printf("teacher-forced %s pos %zu: near-tie excused (gap %.4f)\n", name.c_str(), i, gap[i]);
        continue;
      }
      CHECK(ours[i] == gen[i]);
    }
  }
  if (report()) std::printf("teacher-forced: %d positions, %d excused near-ties\n", compared, excused);
  CHECK(excused <= kMaxExcusedFraction * compared);
}

TEST_CASE("free-running greedy generation equals llama.cpp's until a near-tie", "[model][reference]") {
  NEED_MODEL(m);
  // One decode step per token: under the sanitizers the first 16 of the 64 tokens of each
  // prompt (every prompt, every op, the same code paths; the Release run checks all 64).
  const size_t n_tokens = hearth::test::kSanitized ? 16 : std::numeric_limits<size_t>::max();
  for (const json& p : fixture()["prompts"]) {
    const std::string name = p["name"];
    Ids gen = ids_of(p["generated"]);
    if (gen.size() > n_tokens) gen.resize(n_tokens);
    const std::vector<double> gap = p["top2_gap"].get<std::vector<double>>();
    auto ctx = new_context(*m);
    eval_ok(*ctx, ids_of(p["tokens"]));
    size_t i = 0;
    for (; i < gen.size(); ++i) {
      int32_t t = argmax(ctx->logits_row(0));
      if (t != gen[i]) {
        // The two may part only where llama.cpp itself was close to a tie.
        INFO(name << " diverges at position " << i << ": ours " << t << ", llama.cpp " << gen[i]);
        CHECK(gap[i] < kNearTie);
        break;
      }
      eval_ok(*ctx, {t});
    }
    if (report()) std::printf("free-running %-18s %zu of %zu tokens equal\n", name.c_str(), i, gen.size());
  }
}

TEST_CASE("logits do not depend on thread count, and SIMD levels agree within tolerance", "[model][reference]") {
  NEED_MODEL(m);
  const Ids tokens = ids_of(fixture()["prompts"][2]["tokens"]);  // python_code, 73 tokens
  const std::vector<float> base = last_logits(*m, tokens);

  SECTION("1 and 3 threads give bitwise the logits of 2") {
    // The CPU backend splits every op by rows; a row's arithmetic never depends on the split.
    for (int n : {1, 3}) {
      Loaded other = load_with(m->file->path(), n);
      std::vector<float> l = last_logits(other, tokens);
      INFO(n << " threads");
      CHECK(l == base);
    }
  }
  SECTION("every SIMD level agrees with the active one as closely as llama.cpp does") {
    // Levels sum in different orders; measured max 0.36 (scalar) and 0.41 (AVX2) std against
    // AVX-512 on this prompt: the same amplification of last-bit differences as against
    // llama.cpp, so the same bounds apply.
    const hearth::cpu::SimdLevel active = hearth::cpu::active_simd_level();
    for (auto level : {hearth::cpu::SimdLevel::Scalar, hearth::cpu::SimdLevel::AVX2, hearth::cpu::SimdLevel::AVX512}) {
      if (level > hearth::cpu::detect_simd_level() || level == active) continue;
      hearth::cpu::set_simd_level(level);
      std::vector<float> l = last_logits(*m, tokens);
      hearth::cpu::set_simd_level(active);
      INFO(hearth::cpu::simd_level_name(level));
      const double max_err = vector_error_std(l, base);
      double sum_sq = 0;
      for (size_t i = 0; i < l.size(); ++i) sum_sq += (double(l[i]) - base[i]) * (double(l[i]) - base[i]);
      const double rms_err = std::sqrt(sum_sq / static_cast<double>(l.size())) / stddev(base);
      if (report())
        std::printf("simd %s vs %s: max|diff|/std = %.4f rms/std = %.4f\n", hearth::cpu::simd_level_name(level),
                    hearth::cpu::simd_level_name(active), max_err, rms_err);
      CHECK(max_err <= kLogitMaxTolStd);
      CHECK(rms_err <= kLogitRmsTolStd);
    }
  }
}

TEST_CASE("a token's logits do not depend on how the prompt was chunked", "[model][reference]") {
  NEED_MODEL(m);
  const Ids tokens = ids_of(fixture()["prompts"][2]["tokens"]);  // python_code, 73 tokens
  const std::vector<float> whole = last_logits(*m, tokens);
  for (size_t piece : {1, 7, 64}) {
    auto ctx = new_context(*m);
    for (size_t b = 0; b < tokens.size(); b += piece)
      eval_ok(*ctx, Ids(tokens.begin() + b, tokens.begin() + std::min(tokens.size(), b + piece)));
    auto row = ctx->logits_row(0);
    INFO("pieces of " << piece << " tokens");
    CHECK(std::equal(row.begin(), row.end(), whole.begin(), whole.end()));  // bitwise
  }
}

// --kv-type q8_0 against f16, teacher-forced on llama.cpp's 64 greedy tokens of every
// prompt: the logits of every generated position (q8_0 rounds each K and V element to within
// half a step of max|row| / 127, where f16 keeps 11 bits), and the greedy choice there.
TEST_CASE("a q8_0 KV cache keeps the logits and greedy tokens of f16 within its bound", "[model][reference]") {
  NEED_MODEL(m);
  hearth::test::KvDrift drift;
  const size_t n_gen = hearth::test::kSanitized ? 8 : 64;
  for (const json& p : fixture()["prompts"]) {
    const std::string name = p["name"];
    INFO(name);
    Ids gen = ids_of(p["generated"]);
    gen.resize(std::min(gen.size(), n_gen));
    auto f16 = new_context(*m, 1024, hearth::DType::F16), q8 = new_context(*m, 1024, hearth::DType::Q8_0);
    hearth::test::add_drift(hearth::test::teacher_forced_rows(*f16, ids_of(p["tokens"]), gen),
                            hearth::test::teacher_forced_rows(*q8, ids_of(p["tokens"]), gen), &drift);
  }
  if (report())
    std::printf("q8_0 vs f16: worst max %.4f rms %.4f; greedy differs at %d of %d positions, f16's gap there <= %.4f\n",
                drift.max_std, drift.rms_std, drift.differ, drift.compared, drift.max_differ_gap);
  CHECK(drift.max_std <= kQ8LogitMaxTolStd);
  CHECK(drift.rms_std <= kQ8LogitRmsTolStd);
  CHECK(drift.max_differ_gap < kQ8NearTie);
  // Each change is a near-tie (above); their share is bounded too.
  const double share = n_gen < 64 ? kQ8ShortRunDifferFraction : kQ8MaxDifferFraction;
  CHECK(drift.differ <= std::ceil(share * drift.compared));
}
