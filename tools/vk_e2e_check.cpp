// A manual check (not a CI test): the default model on the CPU and on the Vulkan backend,
// greedy tokens compared, with prefill and decode timings.
//   hearth_vk_e2e_check [model] [n_prompt] [n_gen] [debug]
// HEARTH_KV_TYPE=q8_0 (or f32) keeps the KV cache in that type on both backends.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "common/log.h"
#include "engine/gguf/gguf.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

using namespace hearth;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Run {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  double prefill_s = 0, decode_s = 0;
};

static Run run(Backend& be, std::shared_ptr<const gguf::File> file, const std::vector<int32_t>& prompt, int n_gen) {
  Run r;
  auto m = Model::load(file, be);
  if (!m) {
    printf("load: %s\n", m.error().message.c_str());
    exit(1);
  }
  ContextOptions o;
  o.n_ctx = 1024;
  const char* kv = std::getenv("HEARTH_KV_TYPE");
  if (kv && std::string(kv) == "q8_0") o.kv_type = DType::Q8_0;
  if (kv && std::string(kv) == "f32") o.kv_type = DType::F32;
  auto ctx = InferenceContext::create(**m, be, o);
  if (!ctx) {
    printf("ctx: %s\n", ctx.error().message.c_str());
    exit(1);
  }
  double t0 = now();
  Status st = (*ctx)->eval(prompt);
  if (!st) {
    printf("eval: %s\n", st.error().message.c_str());
    exit(1);
  }
  r.prefill_s = now() - t0;
  t0 = now();
  for (int i = 0; i < n_gen; ++i) {
    const auto& l = (*ctx)->logits();
    r.logits.push_back(l);
    int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    r.tokens.push_back(best);
    if (i + 1 < n_gen) {
      int32_t tk[1] = {best};
      st = (*ctx)->eval(tk);
      if (!st) {
        printf("eval: %s\n", st.error().message.c_str());
        exit(1);
      }
    }
  }
  r.decode_s = now() - t0;
  return r;
}

int main(int argc, char** argv) {
  auto path = resolve_model(argc > 1 ? argv[1] : "gemma-3-270m-q4_k_m");
  if (!path) {
    printf("%s\n", path.error().message.c_str());
    return 1;
  }
  auto f = gguf::File::open(*path);
  if (!f) {
    printf("%s\n", f.error().message.c_str());
    return 1;
  }
  std::shared_ptr<const gguf::File> file(std::move(*f));
  if (argc > 4 && std::string(argv[4]) == "debug") set_log_level(LogLevel::Debug);
  const int n_prompt = argc > 2 ? atoi(argv[2]) : 40, n_gen = argc > 3 ? atoi(argv[3]) : 24;
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok) {
    printf("%s\n", tok.error().message.c_str());
    return 1;
  }
  std::string text =
      "<start_of_turn>user\nWrite a short story about a lighthouse keeper who finds a message in a bottle."
      "<end_of_turn>\n<start_of_turn>model\n";
  std::vector<int32_t> prompt = (*tok)->encode(text, true, true);
  while (static_cast<int>(prompt.size()) < n_prompt) prompt.insert(prompt.end() - 4, 1000 + int(prompt.size()) * 7);
  auto cpu = cpu::make_cpu_backend({2});
  vulkan::VulkanOptions vo;
  auto vk = vulkan::make_vulkan_backend(vo);
  if (!vk) {
    printf("%s\n", vk.error().message.c_str());
    return 1;
  }
  printf("%s\n", (*vk)->info().name.c_str());
  Run c = run(*cpu, file, prompt, n_gen);
  Run v = run(**vk, file, prompt, n_gen);
  int same = 0;
  while (same < n_gen && c.tokens[same] == v.tokens[same]) ++same;
  double md = 0;
  for (size_t i = 0; i < c.logits[0].size(); ++i) md = std::max(md, (double)std::fabs(c.logits[0][i] - v.logits[0][i]));
  printf("greedy tokens equal for %d of %d; first-step max logit diff %g\n", same, n_gen, md);
  const int np = static_cast<int>(prompt.size());
  printf("cpu: prefill %d tok %.3fs, decode %d tok %.3fs (%.1f tok/s)\n", np, c.prefill_s, n_gen - 1, c.decode_s,
         (n_gen - 1) / c.decode_s);
  printf("vk:  prefill %d tok %.3fs, decode %d tok %.3fs (%.1f tok/s)\n", np, v.prefill_s, n_gen - 1, v.decode_s,
         (n_gen - 1) / v.decode_s);
  printf("validation messages: %llu\n", (unsigned long long)vulkan::validation_message_count());
  for (int i = 0; i < n_gen; ++i) printf("%d/%d ", c.tokens[i], v.tokens[i]);
  printf("\n%s\n", (*tok)->decode(v.tokens).c_str());
  return same == n_gen ? 0 : 2;
}
