// Constrained decoding's costs on a model's vocabulary (not a test): the compile of each
// grammar hearth builds (any JSON object, a JSON Schema, tool calls under tool_choice auto and
// required, with the template's call forms), cold and then from the compiler's cache; and per
// generated token, the mask over the whole logits row and the matcher's step, driven through
// the tokens of a realistic answer. Also the logprobs pass (log_softmax_top, 20 alternatives).
//   grammar_bench MODEL.gguf [--runs N]
// Single-threaded per step, as the engine thread runs it; compiles use xgrammar's threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/sampling/distribution.h"
#include "engine/sampling/grammar.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tool_calls.h"

namespace {

using namespace hearth;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
  "hobbies":{"type":"array","items":{"type":"string"},"maxItems":5},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
             "required":["city","zip"]}},"required":["name","age","hobbies","address"]})";

std::vector<Tool> tools() {
  Tool weather{
      "get_weather", "Get the current weather in a city",
      R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city","unit"]})",
      false, ""};
  Tool time{"get_time", "Get the local time in a city",
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})", false, ""};
  return {weather, time};
}

std::vector<TriggeredTag> tags(const ChatTemplate& tmpl) {
  std::vector<TriggeredTag> out;
  for (const CallForm& f : call_forms(tmpl, /*lenient=*/true))
    for (const Tool& t : tools())
      out.push_back({f.trigger.empty() ? f.open(t.name) : f.trigger, f.open(t.name), t.parameters, f.close});
  return out;
}

struct Timing {
  double mean_us = 0, p50_us = 0, max_us = 0;
};

Timing summarize(std::vector<double> us) {
  Timing t;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  for (double v : us) t.mean_us += v;
  t.mean_us /= static_cast<double>(us.size());
  t.p50_us = us[us.size() / 2];
  t.max_us = us.back();
  return t;
}

// Runs a matcher through answer's tokens (then an end-of-generation token), timing mask()
// and accept() per token. Returns the tokens accepted.
size_t drive(std::shared_ptr<const CompiledGrammar> g, const Tokenizer& tok, const std::string& answer, int runs,
             Timing* mask, Timing* accept) {
  std::vector<int32_t> ids = tok.encode(answer, false, false);
  ids.push_back(tok.eog_ids().front());
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()), 0.0f);
  std::vector<double> mask_us, accept_us;
  size_t accepted = 0;
  for (int r = 0; r < runs; ++r) {
    GrammarMatcher m(g);
    accepted = 0;
    for (int32_t id : ids) {
      Clock::time_point t0 = Clock::now();
      m.mask(logits.data(), tok.n_vocab());
      mask_us.push_back(ms_since(t0) * 1e3);
      t0 = Clock::now();
      const bool ok = m.accept(id);
      accept_us.push_back(ms_since(t0) * 1e3);
      if (!ok) break;
      ++accepted;
    }
  }
  *mask = summarize(mask_us);
  *accept = summarize(accept_us);
  return accepted;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--runs N]\n", argv[0]);
    return 2;
  }
  const int runs = argc >= 4 && !std::strcmp(argv[2], "--runs") ? std::atoi(argv[3]) : 5;
  auto file = gguf::File::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "grammar_bench: %s\n", file.error().message.c_str());
    return 1;
  }
  auto tok = Tokenizer::from_gguf(**file);
  auto tmpl = chat_template_from_gguf(**file);
  if (!tok.ok() || !tmpl.ok()) {
    std::fprintf(stderr, "grammar_bench: no tokenizer or chat template\n");
    return 1;
  }
  Clock::time_point t0 = Clock::now();
  std::shared_ptr<GrammarCompiler> compiler = grammar_compiler_for(**tok);
  std::printf("vocabulary: %d tokens, gathered in %.1f ms\n", (*tok)->n_vocab(), ms_since(t0));

  struct Case {
    const char* name;
    std::function<Result<std::shared_ptr<const CompiledGrammar>>()> compile;
    std::string answer;
  };
  const std::vector<Case> cases{
      {"json_object", [&] { return compiler->json_object(); }, R"({"greeting": "hello", "n": 3})"},
      {"json_schema", [&] { return compiler->json_schema(kSchema); },
       R"({"name": "Ada", "age": 36, "hobbies": ["chess", "rowing"], "address": {"city": "Lyon", "zip": "69001"}})"},
      {"tools auto", [&] { return compiler->triggered(tags(*tmpl), false, false); },
       "Let me look that up for you.\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"unit\": "
       "\"celsius\"}}"},
      {"tools required", [&] { return compiler->triggered(tags(*tmpl), true, false); },
       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"unit\": \"celsius\"}}"},
  };
  std::printf("%-15s %12s %12s %10s %10s %10s %10s %8s\n", "grammar", "compile ms", "cached ms", "mask p50",
              "mask mean", "mask max", "step p50", "tokens");
  for (const Case& c : cases) {
    t0 = Clock::now();
    Result<std::shared_ptr<const CompiledGrammar>> g = c.compile();
    const double cold = ms_since(t0);
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, g.error().message.c_str());
      return 1;
    }
    t0 = Clock::now();
    (void)c.compile();
    const double cached = ms_since(t0);
    Timing mask, accept;
    const size_t n = drive(*g, **tok, c.answer, runs, &mask, &accept);
    std::printf("%-15s %12.1f %12.3f %8.1fus %8.1fus %8.1fus %8.1fus %8zu\n", c.name, cold, cached, mask.p50_us,
                mask.mean_us, mask.max_us, accept.p50_us, n);
  }
  // Logits shaped like a model's: most far below the best few.
  std::vector<float> logits(static_cast<size_t>((*tok)->n_vocab()));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& l : logits) l = normal(rng);
  std::vector<TokenScore> top;
  std::vector<double> us;
  for (int r = 0; r < 50; ++r) {
    t0 = Clock::now();
    log_softmax_top(logits.data(), (*tok)->n_vocab(), 42, 20, &top);
    us.push_back(ms_since(t0) * 1e3);
  }
  const Timing lp = summarize(us);
  std::printf("logprobs (top 20): p50 %.1f us, mean %.1f us\n", lp.p50_us, lp.mean_us);
  return 0;
}
