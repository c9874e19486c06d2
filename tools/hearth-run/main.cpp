// hearth-run: the engine in-process, no daemon. Generates text for one prompt, or
// benchmarks prefill and decode throughput (--bench).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/cpu/vec_dot.h"
#include "common/log.h"
#include "daemon/devices.h"
#include "engine/model/context.h"
#include "engine/scheduler/generate.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/model/model_path.h"
#include "run.h"

namespace hearth {
namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "hearth-run: %s\n", msg.c_str());
  return code;
}

constexpr int kExitUsage = 2;  // a backend or device this build or machine cannot serve

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  CLI::App app{"hearth-run: run a GGUF model in-process (no daemon)"};
  std::string model_arg, prompt, system_prompt, simd, log_level = "warn", backend = "auto", chat_template;
  int n_predict = 128, threads = 0, n_ctx = 0, vk_device = -1;
  GenerateOptions gen;
  gen.sampling.temperature = 0.8f;
  uint64_t seed = kRandomSeed;
  bool chat = false, json = false, bench = false, version = false, list = false;
  BenchOptions bo;
  app.add_option("-m,--model", model_arg,
                 "a catalog name (qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m), a file name in the models folder, "
                 "or a path (default: qwen2.5-coder:0.5b)");
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("-n,--n-predict", n_predict, "tokens to generate at most")->check(CLI::Range(0, 1 << 20));
  app.add_option("--temp", gen.sampling.temperature, "temperature (0 = greedy)");
  app.add_option("--top-k", gen.sampling.top_k, "top-k (0 = off)");
  app.add_option("--top-p", gen.sampling.top_p, "top-p (1 = off)");
  app.add_option("--min-p", gen.sampling.min_p, "min-p (0 = off)");
  app.add_option("--repeat-penalty", gen.sampling.repetition_penalty, "repetition penalty (1 = off)");
  app.add_option("--presence-penalty", gen.sampling.presence_penalty, "presence penalty");
  app.add_option("--frequency-penalty", gen.sampling.frequency_penalty, "frequency penalty");
  app.add_option("--stop", gen.stop, "stop string (repeatable)");
  app.add_option("--seed", seed, "random seed (default: random)");
  app.add_option("-t,--threads", threads, "CPU threads (default: physical cores)")->check(CLI::Range(0, 1024));
  app.add_option("--backend", backend, "compute backend: auto (cuda, then a hardware vulkan device, then cpu), cpu, vulkan")
      ->check(CLI::IsMember({"auto", "cpu", "vulkan", "cuda"}));
  app.add_option("--vk-device", vk_device, "Vulkan device index from --list-devices (default: the first usable one)")
      ->check(CLI::Range(-1, 1 << 16));
  app.add_flag("--list-devices", list, "print the compute devices this build can use, then exit");
  app.add_option("-c,--ctx", n_ctx, "context size in tokens (default: prompt + n-predict)")->check(CLI::Range(0, 1 << 24));
  app.add_flag("--chat", chat, "wrap the prompt in the model's chat template");
  app.add_option("--system", system_prompt, "system message (with --chat)");
  app.add_option("--chat-template", chat_template,
                 "turn format when the model's own template is not one hearth recognises (default: the model's)")
      ->check(CLI::IsMember({"chatml", "gemma", "llama3"}))
      ->envname("HEARTH_CHAT_TEMPLATE");
  app.add_flag("--json", json, "print one JSON object: text, tokens, timings");
  app.add_flag("--bench", bench, "benchmark prefill and decode throughput");
  app.add_option("--pp", bo.pp, "bench: prompt tokens")->check(CLI::Range(0, 1 << 20));
  app.add_option("--ubatch", bo.ubatch, "bench: prompt tokens per forward pass (0: 512; small values show the cost of the small chunks a step budget reads)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--tg", bo.tg, "bench: generated tokens")->check(CLI::Range(0, 1 << 20));
  app.add_option("--reps", bo.reps, "bench: repetitions")->check(CLI::Range(1, 1000));
  app.add_flag("--reprobe", bo.reprobe,
               "bench: measure this machine's int8 and memory-read peaks again (they are kept in the cache folder)");
  app.add_option("--simd", simd, "force a SIMD level: scalar, avx2, avx512 (testing)");
  app.add_option("--log-level", log_level, "debug, info, warn, error");
  app.add_flag("--version", version, "print the version");
  CLI11_PARSE(app, argc, argv);

  if (version) {
    std::printf("hearth-run %s\n", HEARTH_VERSION);
    return 0;
  }
  LogLevel level;
  if (!parse_log_level(log_level, &level)) return fail("unknown log level '" + log_level + "'");
  set_log_level(level);
  if (list) {
    std::fputs(daemon::list_devices(threads).c_str(), stdout);
    return 0;
  }
  if (!simd.empty()) {
    cpu::SimdLevel l;
    if (!cpu::parse_simd_level(simd, &l)) return fail("unknown SIMD level '" + simd + "'");
    cpu::set_simd_level(l);
  }
  if (!bench && prompt.empty()) return fail("nothing to do: give a prompt with -p (or --bench)");
  if (Status st = daemon::check_backend_available(backend, vk_device); !st) return fail(st.error().message, kExitUsage);

  Result<std::string> path = resolve_model(model_arg);
  if (!path) return fail(path.error().message);
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(*path);
  if (!file) return fail(file.error().message);
  Loaded l;
  l.file = std::move(*file);
  Result<std::unique_ptr<Backend>> be = daemon::make_backend(backend, threads, vk_device);
  if (!be) return fail(be.error().message);
  l.backend = std::move(*be);
  Result<std::unique_ptr<Model>> model = Model::load(l.file, *l.backend);
  if (!model) return fail(model.error().message);
  l.model = std::move(*model);
  LOG_INFO("model " + l.model->config().name + " on " + l.backend->info().name);

  if (bench) {
    bo.json = json;
    bo.threads = threads;
    return run_bench(l, *path, bo);
  }

  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*l.file);
  if (!tok) return fail(tok.error().message);
  l.tokenizer = std::move(*tok);

  std::vector<int32_t> ids;
  if (chat) {
    Result<ChatTemplate> tmpl = chat_template_for_model(*l.file, chat_template);
    if (!tmpl) return fail(*path + ": chat template: " + tmpl.error().message);
    std::vector<ChatMessage> msgs;
    if (!system_prompt.empty()) msgs.push_back({"system", system_prompt, {}});
    msgs.push_back({"user", prompt, {}});
    Result<std::vector<ChatSegment>> segs = render_chat(*tmpl, msgs, true);
    if (!segs) return fail(segs.error().message);
    ids = l.tokenizer->encode_segments(*segs);
  } else {
    if (!system_prompt.empty()) return fail("--system needs --chat");
    ids = l.tokenizer->encode(prompt, l.tokenizer->add_bos(), false);
  }

  ContextOptions co;
  co.n_ctx = n_ctx > 0 ? n_ctx : static_cast<int32_t>(ids.size()) + n_predict;
  if (co.n_ctx > l.model->config().n_ctx_train) co.n_ctx = l.model->config().n_ctx_train;
  if (auto problem = check_prompt(ids, co.n_ctx)) return fail(problem->message);
  Result<std::unique_ptr<InferenceContext>> ctx = InferenceContext::create(*l.model, *l.backend, co);
  if (!ctx) return fail(ctx.error().message);

  gen.max_tokens = n_predict;
  gen.sampling.seed = seed;
  TextCallback stream;
  if (!json)
    stream = [](std::string_view s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  Result<GenerateResult> r = generate(**ctx, *l.tokenizer, ids, gen, stream);
  if (!r) return fail(r.error().message);
  const GenerateTimings& t = r->timings;
  if (json) {
    nlohmann::json j;
    j["text"] = r->text;
    j["tokens"] = r->tokens;
    j["finish_reason"] = r->finish_reason;
    j["timings"] = {{"prompt_tokens", t.prompt_tokens},  {"generated_tokens", t.generated_tokens},
                    {"ttft_ms", t.ttft_ms},              {"prefill_ms", t.prefill_ms},
                    {"prefill_tok_s", t.prefill_tok_s()}, {"decode_tok_s", t.decode_tok_s()},
                    {"itl_ms_mean", t.itl_ms_mean()}};
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("\n");
    std::fprintf(stderr, "\n[prompt %d tokens, ttft %.1f ms, prefill %.1f tok/s | %d tokens, decode %.1f tok/s, itl %.2f ms]\n",
                 t.prompt_tokens, t.ttft_ms, t.prefill_tok_s(), t.generated_tokens, t.decode_tok_s(), t.itl_ms_mean());
  }
  return 0;
}
