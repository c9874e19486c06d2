// Continuous batching's promise at the model level: a sequence's logits do not depend on
// which other sequences share its forward pass, or where its KV slots are.
#include <catch2/catch.hpp>
#include <numeric>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/vec_dot.h"
#include "engine/model/context.h"
#include "test_util.h"
#include "tests/test_model.h"
#include "tests/tools/synthetic_model.h"

namespace {

using namespace hearth;

struct Runner {
  const Model& model;
  Backend& backend;
  ForwardBuffers fb;

  // Runs one forward pass and returns the logits of batch.logit_rows, row after row.
  std::vector<float> run(const ForwardBatch& batch) {
    Graph g;
    model.build_forward(g, batch, fb.act, fb.kv);
    REQUIRE(backend.execute(g).ok());
    const size_t v = static_cast<size_t>(model.config().n_vocab);
    std::vector<float> out(batch.logit_rows.size() * v);
    REQUIRE(backend.read(*fb.act.logits.buffer, fb.act.logits.offset, out.data(), out.size() * sizeof(float)).ok());
    return out;
  }
};

std::vector<float> row(const std::vector<float>& all, size_t i, size_t v) {
  return {all.begin() + i * v, all.begin() + (i + 1) * v};
}

// Runs prompts a and b (then one decode step each: a_next, b_next) alone, each in its own
// pool with slots = positions, and together in one pool with scattered slots, and requires
// bitwise equal logits.
void check_batched_equals_alone(const Model& model, Backend& backend, const std::vector<int32_t>& a,
                                const std::vector<int32_t>& b, int32_t a_next, int32_t b_next) {
  const size_t v = static_cast<size_t>(model.config().n_vocab);
  constexpr int kSlots = 64;
  // Alone: each sequence in its own pool, slots = positions.
  std::vector<int32_t> identity(kSlots);
  std::iota(identity.begin(), identity.end(), 0);
  auto alone = [&](const std::vector<int32_t>& prompt, int32_t next) {
    Runner r{model, backend, std::move(*allocate_forward_buffers(model.config(), backend, kSlots, 32, 4, DType::F16))};
    ForwardBatch p;
    p.seqs.push_back({prompt, 0, identity});
    p.logit_rows = {static_cast<int32_t>(prompt.size() - 1)};
    std::vector<float> first = r.run(p);
    const int32_t step_tokens[1] = {next};
    ForwardBatch d;
    d.seqs.push_back({step_tokens, static_cast<int32_t>(prompt.size()), identity});
    d.logit_rows = {0};
    return std::make_pair(first, r.run(d));
  };
  const auto [a_prefill, a_decode] = alone(a, a_next);
  const auto [b_prefill, b_decode] = alone(b, b_next);

  // Together: one pool, B's positions in the low slots backwards, A's in the high ones.
  std::vector<int32_t> slots_a(kSlots), slots_b(kSlots);
  for (int i = 0; i < kSlots; ++i) {
    slots_a[i] = kSlots + i;
    slots_b[i] = kSlots - 1 - i;
  }
  Runner r{model, backend,
           std::move(*allocate_forward_buffers(model.config(), backend, 2 * kSlots, 32, 4, DType::F16))};
  ForwardBatch p;
  p.seqs.push_back({b, 0, slots_b});
  p.seqs.push_back({a, 0, slots_a});
  p.logit_rows = {static_cast<int32_t>(b.size() - 1), static_cast<int32_t>(b.size() + a.size() - 1)};
  const std::vector<float> both = r.run(p);
  REQUIRE(row(both, 0, v) == b_prefill);
  REQUIRE(row(both, 1, v) == a_prefill);

  // A decode step of each, in one pass.
  const int32_t a_step[1] = {a_next}, b_step[1] = {b_next};
  ForwardBatch d;
  d.seqs.push_back({a_step, static_cast<int32_t>(a.size()), slots_a});
  d.seqs.push_back({b_step, static_cast<int32_t>(b.size()), slots_b});
  d.logit_rows = {0, 1};
  const std::vector<float> step = r.run(d);
  REQUIRE(row(step, 0, v) == a_decode);
  REQUIRE(row(step, 1, v) == b_decode);
}

// Speculative decoding's premise: the logits of a chunk of tokens, one row each, are bitwise
// those of the same tokens run one per step. A sequence reads `prompt`, then `next` (1 to
// 12 tokens) either as one chunk with logits for every row, or token by token; the chunk's
// row i must equal the i-th single step's logits, whatever the chunk's length.
void check_chunk_equals_steps(const Model& model, Backend& backend, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& next) {
  const size_t v = static_cast<size_t>(model.config().n_vocab);
  constexpr int kSlots = 64;
  std::vector<int32_t> slots(kSlots);
  std::iota(slots.begin(), slots.end(), 0);
  auto fresh = [&] {
    Runner r{model, backend, std::move(*allocate_forward_buffers(model.config(), backend, kSlots, 32, 16, DType::F16))};
    ForwardBatch p;
    p.seqs.push_back({prompt, 0, slots});
    p.logit_rows = {static_cast<int32_t>(prompt.size() - 1)};
    r.run(p);
    return r;
  };
  const int32_t n0 = static_cast<int32_t>(prompt.size());
  Runner steps = fresh();
  std::vector<std::vector<float>> one_by_one;
  for (size_t i = 0; i < next.size(); ++i) {
    ForwardBatch d;
    d.seqs.push_back({std::span<const int32_t>(&next[i], 1), n0 + static_cast<int32_t>(i), slots});
    d.logit_rows = {0};
    one_by_one.push_back(steps.run(d));
  }
  for (size_t n = 1; n <= next.size(); ++n) {
    Runner chunk = fresh();
    ForwardBatch c;
    c.seqs.push_back({std::span<const int32_t>(next.data(), n), n0, slots});
    for (size_t i = 0; i < n; ++i) c.logit_rows.push_back(static_cast<int32_t>(i));
    const std::vector<float> all = chunk.run(c);
    for (size_t i = 0; i < n; ++i) {
      INFO("chunk of " << n << " tokens, row " << i);
      REQUIRE(row(all, i, v) == one_by_one[i]);
    }
  }
}

// Prefill of `prompt` in passes of `pieces` tokens (summing to its length), slots =
// positions: the logits of its last token.
std::vector<float> last_logits_in_pieces(const Model& model, Backend& backend, const std::vector<int32_t>& prompt,
                                         const std::vector<size_t>& pieces) {
  constexpr int kSlots = 64;
  REQUIRE(prompt.size() <= kSlots);
  std::vector<int32_t> identity(kSlots);
  std::iota(identity.begin(), identity.end(), 0);
  Runner r{model, backend,
           std::move(*allocate_forward_buffers(model.config(), backend, kSlots, kSlots, 4, DType::F16))};
  std::vector<float> out;
  size_t at = 0;
  for (size_t n : pieces) {
    ForwardBatch p;
    p.seqs.push_back({std::span<const int32_t>(prompt.data() + at, n), static_cast<int32_t>(at), identity});
    p.logit_rows = {static_cast<int32_t>(n - 1)};
    out = r.run(p);
    at += n;
  }
  REQUIRE(at == prompt.size());
  return out;
}

}  // namespace

// Where the CPU has AMX, prefill passes of 16 tokens and more run their matmuls on tiles,
// 16 tokens at a time, and the tokens left over (and decode steps) on AVX-512: a token's
// logits must not show which, on every weight type of the default model (Q5_0, Q8_0, Q4_K,
// Q6_K). The last of 48 tokens goes through tiles in one pass of 48 or in a pass of 16,
// and through AVX-512 decoded alone or in a pass of 8 or of 45 (32 tiled, 13 not).
TEST_CASE("a prompt's last logits are bitwise the same prefilled whole, in pieces and decoded last") {
  std::optional<test::LoadedModel> gemma = test::load_test_model();
  if (!gemma) return;
  auto& [file, backend, model, tok] = *gemma;
  INFO("simd level " << cpu::simd_level_name(cpu::active_simd_level()));
  std::vector<int32_t> prompt = {2};
  for (int32_t i = 1; i < 48; ++i) prompt.push_back(100 + (i * 7919) % 200000);
  const std::vector<float> whole = last_logits_in_pieces(*model, *backend, prompt, {48});
  for (const std::vector<size_t>& pieces : std::vector<std::vector<size_t>>{{47, 1}, {40, 8}, {3, 45}, {32, 16}}) {
    CAPTURE(pieces);
    REQUIRE(last_logits_in_pieces(*model, *backend, prompt, pieces) == whole);
  }
}

// Two sequences of a synthetic Q8_0 model of `arch` on the CPU, alone and batched in any
// slots (check_batched_equals_alone); the model's configuration, for the caller's checks.
ModelConfig check_synthetic_batched_equals_alone(const std::string& arch) {
  test::SyntheticOptions o;
  o.arch = arch;
  o.type = DType::Q8_0;
  const std::vector<uint8_t> bytes = std::move(*test::make_synthetic_model(o));
  std::shared_ptr<const gguf::File> file = std::move(*gguf::File::from_memory(bytes.data(), bytes.size()));
  std::unique_ptr<Backend> backend = cpu::make_cpu_backend({2});
  auto model = Model::load(file, *backend);
  REQUIRE(model.ok());
  check_batched_equals_alone(**model, *backend, {1, 40, 77, 300, 5, 5, 91, 260, 13, 14, 150, 200, 8},
                             {1, 250, 33, 61, 62, 63, 19}, 99, 123);
  check_chunk_equals_steps(**model, *backend, {1, 40, 77, 300, 5}, {5, 91, 260, 13, 14, 150, 200, 8, 77, 300, 5, 9});
  return (*model)->config();
}

TEST_CASE("a sequence's logits are bitwise the same alone and batched with another, in any slots") {
  std::optional<test::LoadedModel> gemma = test::load_test_model();
  if (!gemma) return;
  auto& [file, backend, model, tok] = *gemma;
  check_batched_equals_alone(*model, *backend,
                             {2, 818, 5279, 529, 7001, 563, 506, 5279, 529, 506, 2891, 529, 7001, 236761, 1030},
                             {2, 9259, 1902, 236764, 1217, 659, 611, 236881, 107, 105}, 563, 2364);
}

TEST_CASE("a qwen2 sequence's logits are bitwise the same alone and batched with another, in any slots") {
  // A synthetic qwen2 model: the Q/K/V biases are added row by row like everything else.
  check_synthetic_batched_equals_alone("qwen2");
}

TEST_CASE("a qwen3 sequence's logits are bitwise the same alone and batched with another, in any slots") {
  // A synthetic qwen3 model: the per-head Q/K norms reduce within a row, like everything else.
  check_synthetic_batched_equals_alone("qwen3");
}

TEST_CASE("a qwen3moe sequence's logits are bitwise the same alone and batched with another, in any slots") {
  // A synthetic qwen3moe model (8 experts, 3 per token): the sequences' tokens share experts
  // in the batched pass, and each expert's weights are read once for all the tokens that
  // chose it, yet every token's expert choice and sum are those it gets alone. Q8_0: the
  // expert stacks are repacked where the CPU has the kernels (AVX-512).
  REQUIRE(check_synthetic_batched_equals_alone("qwen3moe").n_expert == 8);
}

TEST_CASE("a chunk of tokens gives bitwise the logits of the same tokens run one per step") {
  // What speculative decoding's bit-identical output rests on: verifying k drafts in one
  // pass reads, for each, the logits a step of its own would have given.
  for (const char* arch : {"llama", "gemma3"}) {
    INFO(arch);
    check_synthetic_batched_equals_alone(arch);
  }
  const std::string gemma = test::gemma_model_path();
  const std::string qwen = test::installed_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  if (gemma.empty()) WARN("default model not installed; skipped");
  for (const std::string& path : {gemma, qwen}) {
    if (path.empty()) continue;
    INFO(path);
    test::LoadedModel m = std::move(*test::load_test_model(path));
    check_chunk_equals_steps(*m.model, *m.backend, {2, 818, 5279, 529, 7001, 563, 506},
                             {5279, 529, 506, 2891, 529, 7001, 1030, 107, 105, 818, 5279, 563});
  }
}
