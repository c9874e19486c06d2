// The generation loop on the default model: seeds, stop strings, limits, timings.
#include "engine/scheduler/generate.h"

#include <catch2/catch.hpp>

#include "backends/cpu/cpu_backend.h"
#include "engine/model/context.h"
#include "test_util.h"

namespace {

using namespace hearth;

struct Engine {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend = cpu::make_cpu_backend({2});
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;

  bool load() {
    const std::string path = test::gemma_model_path();
    if (path.empty()) return false;
    file = std::move(*gguf::File::open(path));
    model = std::move(*Model::load(file, *backend));
    tok = std::move(*Tokenizer::from_gguf(*file));
    return true;
  }

  GenerateResult run(const std::string& prompt, const GenerateOptions& o) {
    std::vector<int32_t> ids = tok->encode(prompt, true, false);
    ContextOptions co;
    co.n_ctx = 256;
    auto ctx = std::move(*InferenceContext::create(*model, *backend, co));
    std::string streamed;
    Result<GenerateResult> r = generate(*ctx, *tok, ids, o, [&](std::string_view s) {
      streamed += s;
      return true;
    });
    REQUIRE(r.ok());
    REQUIRE(streamed == r->text);  // what was streamed is exactly the final text
    return std::move(*r);
  }
};

}  // namespace

TEST_CASE("Sampling with the same seed gives the same text and another seed another text") {
  Engine e;
  if (!e.load()) {
    WARN("default model not installed; skipped");
    return;
  }
  GenerateOptions o;
  o.max_tokens = 24;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 7;
  const GenerateResult a = e.run("Once upon a time", o);
  const GenerateResult b = e.run("Once upon a time", o);
  REQUIRE(a.tokens == b.tokens);
  o.sampling.seed = 8;
  const GenerateResult c = e.run("Once upon a time", o);
  REQUIRE(a.tokens != c.tokens);
}

TEST_CASE("A stop string ends generation before it, even across tokens, and max_tokens gives length") {
  Engine e;
  if (!e.load()) {
    WARN("default model not installed; skipped");
    return;
  }
  GenerateOptions o;
  o.max_tokens = 40;
  o.sampling.temperature = 0.0f;
  const GenerateResult full = e.run("The capital of France is", o);
  REQUIRE(full.finish_reason == "length");
  REQUIRE(full.tokens.size() == 40u);
  REQUIRE(full.timings.generated_tokens == 40);
  REQUIRE(full.timings.itl_ms.size() == 39u);
  REQUIRE(full.timings.ttft_ms >= full.timings.prefill_ms);
  REQUIRE(full.text.size() > 20);

  // A stop string made of the end of one token and the start of later ones.
  const size_t at = full.text.size() / 2;
  const std::string stop = full.text.substr(at, 6);
  o.stop = {stop};
  const GenerateResult cut = e.run("The capital of France is", o);
  REQUIRE(cut.finish_reason == "stop");
  REQUIRE(cut.text == full.text.substr(0, full.text.find(stop)));
}
