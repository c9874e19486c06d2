// libFuzzer entry point for JSON Schemas as constrained decoding takes them (HEARTH_FUZZ;
// scripts/fuzz builds and runs it). The input is a schema as a client would send it. For any
// input: schema_for_grammar and the compiler either refuse it with an error or compile it;
// a compiled grammar's mask and accept agree: for 32 steps, the first token the mask allows
// is accepted (on a vocabulary of the 95 printable ASCII characters, one token each, and a
// stop token).
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./schema_fuzz writes a few schemas into DIR and exits.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/sampling/grammar.h"
#include "fuzz_seeds.h"

namespace {

constexpr int32_t kStop = 95;

hearth::GrammarCompiler& compiler() {
  static hearth::GrammarCompiler c = [] {
    std::vector<std::string> vocab;
    for (char ch = ' '; ch <= '~'; ++ch) vocab.emplace_back(1, ch);
    vocab.emplace_back("");  // the stop token: a control token
    return hearth::GrammarCompiler(std::move(vocab), kStop + 1, {kStop});
  }();
  return c;
}

void write_seeds(const std::filesystem::path& dir) {
  const char* seeds[] = {
      R"({"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer","minimum":0}},"required":["city"]})",
      R"({"type":"array","items":{"enum":["a","b",3]},"minItems":1,"maxItems":4})",
      R"({"anyOf":[{"type":"string","pattern":"^[a-z]+$"},{"type":"number"}]})",
      R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})",
      R"({"type":"string","minLength":2,"maxLength":5})",
      R"({"type":"string","format":"date-time"})",
      R"({"type":"string","minLength":3666})",  // took over 30 s before repeats were bounded
      // 11,298 stacked stars took over 30 s before quantifiers were bounded
      R"({"anyOf":[{"type":"string","pattern":"^_a-basic_g_sub_s>>>>>>>*A**********************05z?}}}}}"}]})",
  };
  int i = 0;
  for (const char* s : seeds) std::ofstream(dir / ("seed" + std::to_string(i++))) << s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  auto grammar = compiler().json_schema(schema);
  if (!grammar) return 0;
  hearth::GrammarMatcher m(*grammar);
  std::vector<float> logits(kStop + 1);
  for (int step = 0; step < 32 && !m.terminated(); ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    m.mask(logits.data(), kStop + 1);
    int32_t pick = -1;
    for (int32_t t = 0; t <= kStop && pick < 0; ++t)
      if (!std::isinf(logits[static_cast<size_t>(t)])) pick = t;
    if (pick < 0) break;  // nothing allowed: the grammar may need a token this vocabulary lacks
    if (!m.accept(pick)) std::abort();
  }
  return 0;
}
