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
#include "engine/model/model_path.h"
#include "engine/scheduler/generate.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/chat_template.h"
#include "run.h"

namespace hearth {
namespace {

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "hearth-run: %s\n", msg.c_str());
  return code;
}

DType kv_type_of(const std::string& name) {
  return name == "f32" ? DType::F32 : name == "q8_0" ? DType::Q8_0 : DType::F16;
}

constexpr int kExitUsage = 2;  // a backend or device this build or machine cannot serve

struct Args {
  std::string model, prompt, system_prompt, simd, log_level = "warn", chat_template, kv_type = "f16";
  std::string draft_model;  // --draft-model: speculative decoding (speculate.cpp)
  int n_predict = 128, n_ctx = 0;
  daemon::BackendChoice device;  // --backend, --threads, --vk-device, --cuda-device
  GenerateOptions gen;
  uint64_t seed = kRandomSeed;
  bool chat = false, json = false, bench = false, version = false, list = false, read_probe = false;
  BenchOptions bo;
};

void add_options(CLI::App& app, Args& a) {
  a.gen.sampling.temperature = 0.8f;
  app.add_option("-m,--model", a.model,
                 "a catalog name (qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m), a file name in the models folder, "
                 "or a path (default: qwen2.5-coder:0.5b)");
  app.add_option("-p,--prompt", a.prompt, "prompt text");
  app.add_option("-n,--n-predict", a.n_predict, "tokens to generate at most")->check(CLI::Range(0, 1 << 20));
  SamplingParams& sp = a.gen.sampling;
  app.add_option("--temp", sp.temperature, "temperature (0 = greedy)");
  app.add_option("--top-k", sp.top_k, "top-k (0 = off)");
  app.add_option("--top-p", sp.top_p, "top-p (1 = off)");
  app.add_option("--min-p", sp.min_p, "min-p (0 = off)");
  app.add_option("--repeat-penalty", sp.repetition_penalty, "repetition penalty (1 = off)");
  app.add_option("--presence-penalty", sp.presence_penalty, "presence penalty");
  app.add_option("--frequency-penalty", sp.frequency_penalty, "frequency penalty");
  app.add_option("--stop", a.gen.stop, "stop string (repeatable)");
  app.add_option("--seed", a.seed, "random seed (default: random)");
  app.add_option("-t,--threads", a.device.threads, "CPU threads (default: physical cores)")->check(CLI::Range(0, 1024));
  app.add_option("--backend", a.device.backend,
                 "compute backend: auto (cuda, then a hardware vulkan device, then cpu), cpu, vulkan, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "vulkan", "cuda"}));
  app.add_option("--vk-device", a.device.vk_device,
                 "Vulkan device index from --list-devices (default: the first usable one)")
      ->check(CLI::Range(-1, 1 << 16));
  app.add_option("--cuda-device", a.device.cuda_device,
                 "CUDA device index from --list-devices (default: the usable one with the most memory)")
      ->check(CLI::Range(-1, 1 << 16));
  app.add_flag("--list-devices", a.list, "print the compute devices this build can use, then exit");
  app.add_flag("--read-probe", a.read_probe,
               "measure this machine's memory read every way the probe knows (on -t threads), print each, then exit");
  app.add_option("-c,--ctx", a.n_ctx, "context size in tokens (default: prompt + n-predict)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_flag("--chat", a.chat, "wrap the prompt in the model's chat template");
  app.add_option("--system", a.system_prompt, "system message (with --chat)");
  app.add_option("--chat-template", a.chat_template,
                 "turn format when the model's own template is not one hearth recognises (default: the model's)")
      ->check(CLI::IsMember({"chatml", "gemma", "llama3", "qwen3"}))
      ->envname("HEARTH_CHAT_TEMPLATE");
  app.add_option("--kv-type", a.kv_type, "KV cache element type (default f16), as hearthd's --kv-type")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  app.add_option("--draft-model", a.draft_model,
                 "a smaller model with the same tokenizer that drafts tokens for -m to verify (speculative decoding, "
                 "as hearthd's --draft-model; the answer does not change); with --bench, decode is timed without and "
                 "with drafts");
  app.add_flag("--json", a.json, "print one JSON object: text, tokens, timings");
  app.add_flag("--bench", a.bench, "benchmark prefill and decode throughput");
  app.add_option("--pp", a.bo.pp, "bench: prompt tokens")->check(CLI::Range(0, 1 << 20));
  app.add_option("--ubatch", a.bo.ubatch,
                 "bench: prompt tokens per forward pass (0: 512; small values show the cost of the small chunks a "
                 "step budget reads)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--tg", a.bo.tg, "bench: generated tokens")->check(CLI::Range(0, 1 << 20));
  app.add_option("--reps", a.bo.reps, "bench: repetitions")->check(CLI::Range(1, 1000));
  app.add_option("--bench-ops", a.bo.ops_steps,
                 "bench: also time this many decode steps op by op (at --tg tokens of context), against the bytes "
                 "each op moves")
      ->check(CLI::Range(0, 1000));
  app.add_option("--ops-context", a.bo.ops_context,
                 "bench: tokens of context before the steps --bench-ops times (default: --tg), e.g. 8192 for "
                 "attention at long contexts without generating that many tokens")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--reprobe", a.bo.reprobe,
               "bench: measure this machine's int8 and memory-read peaks again (they are kept in the cache folder)");
  app.add_option("--simd", a.simd,
                 "force a SIMD level: scalar, avx2, avx512, amx (testing; HEARTH_AMX=0 also keeps AMX off)");
  app.add_option("--log-level", a.log_level, "debug, info, warn, error");
  app.add_flag("--version", a.version, "print the version");
}

// The weights file, the backend and the model on it (no tokenizer yet).
Result<Loaded> load(const Args& a, const std::string& path) {
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(path);
  if (!file) return file.error();
  Loaded l;
  l.file = std::move(*file);
  Result<std::unique_ptr<Backend>> be = daemon::make_backend(a.device);
  if (!be) return be.error();
  l.backend = std::move(*be);
  Result<std::unique_ptr<Model>> model = Model::load(l.file, *l.backend);
  if (!model) return model.error();
  l.model = std::move(*model);
  LOG_INFO("model " + l.model->config().name + " on " + l.backend->info().name);
  return l;
}

// The prompt's token ids: the text as it is, or wrapped in the model's chat template.
Result<std::vector<int32_t>> prompt_tokens(const Args& a, const Loaded& l, const std::string& path) {
  if (!a.chat) {
    if (!a.system_prompt.empty()) return make_error("--system needs --chat");
    return l.tokenizer->encode(a.prompt, l.tokenizer->add_bos(), false);
  }
  Result<ChatTemplate> tmpl = chat_template_for_model(*l.file, a.chat_template);
  if (!tmpl) return make_error(path + ": chat template: " + tmpl.error().message);
  std::vector<ChatMessage> msgs;
  if (!a.system_prompt.empty()) msgs.push_back({"system", a.system_prompt, {}});
  msgs.push_back({"user", a.prompt, {}});
  Result<std::vector<ChatSegment>> segs = render_chat(*tmpl, msgs, true);
  if (!segs) return segs.error();
  return l.tokenizer->encode_segments(*segs);
}

// drafts: the drafts verified and kept, with --draft-model (else null).
void print_result(const GenerateResult& r, bool json, const RequestTimings* drafts = nullptr) {
  const GenerateTimings& t = r.timings;
  if (json) {
    nlohmann::json j;
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["finish_reason"] = r.finish_reason;
    j["timings"] = {{"prompt_tokens", t.prompt_tokens},
                    {"generated_tokens", t.generated_tokens},
                    {"ttft_ms", t.ttft_ms},
                    {"prefill_ms", t.prefill_ms},
                    {"prefill_tok_s", t.prefill_tok_s()},
                    {"decode_tok_s", t.decode_tok_s()},
                    {"itl_ms_mean", t.itl_ms_mean()}};
    if (drafts)
      j["timings"].update({{"draft_tokens", drafts->draft_tokens}, {"accepted_tokens", drafts->accepted_tokens}});
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("\n");
    std::fprintf(stderr,
                 "\n[prompt %d tokens, ttft %.1f ms, prefill %.1f tok/s | %d tokens, decode %.1f tok/s, itl %.2f ms]\n",
                 t.prompt_tokens, t.ttft_ms, t.prefill_tok_s(), t.generated_tokens, t.decode_tok_s(), t.itl_ms_mean());
    if (drafts)
      std::fprintf(stderr, "[drafts: %lld verified, %lld kept]\n", static_cast<long long>(drafts->draft_tokens),
                   static_cast<long long>(drafts->accepted_tokens));
  }
}

// The same generation through a one-sequence scheduler with drafts (speculate.cpp).
int generate_with_drafts(const Args& a, Loaded& l, const std::string& path, const std::vector<int32_t>& ids,
                         int32_t n_ctx, const TextCallback& stream) {
  Result<std::unique_ptr<LoadedDraft>> d = load_draft(l, path, a.draft_model);
  if (!d) return fail(d.error().message);
  Result<std::unique_ptr<Scheduler>> s = one_sequence_scheduler(l, n_ctx, kv_type_of(a.kv_type), (*d)->bound);
  if (!s) return fail(s.error().message);
  GenerationRequest req;
  req.prompt = ids;
  req.max_tokens = a.n_predict;
  req.sampling = a.gen.sampling;
  req.sampling.seed = a.seed;
  req.stop = a.gen.stop;
  req.top_logprobs = 0;  // the ids of the tokens, for --json
  GenerateResult r;
  Result<RequestEvent> end = run_request(**s, std::move(req), [&](const RequestEvent& ev) {
    r.text += ev.text;
    for (const TokenLogprob& lp : ev.logprobs) r.tokens.push_back(lp.token);
    return !stream || stream(ev.text);
  });
  if (!end) return fail(end.error().message);
  r.finish_reason = end->finish_reason;
  GenerateTimings& t = r.timings;
  t.prompt_tokens = end->usage.prompt_tokens;
  t.generated_tokens = end->usage.completion_tokens;
  t.prefill_ms = end->timings.prefill_ms;
  t.ttft_ms = end->timings.ttft_ms;
  t.decode_ms = end->timings.decode_ms;
  if (end->timings.itl_mean_ms > 0) t.itl_ms = {end->timings.itl_mean_ms};  // the scheduler reports the mean gap
  print_result(r, a.json, &end->timings);
  return 0;
}

// Generates for the prompt (text streamed to stdout unless --json) and prints the result.
int run_generate(const Args& a, Loaded& l, const std::string& path) {
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*l.file);
  if (!tok) return fail(tok.error().message);
  l.tokenizer = std::move(*tok);
  Result<std::vector<int32_t>> ids = prompt_tokens(a, l, path);
  if (!ids) return fail(ids.error().message);

  ContextOptions co;
  co.kv_type = kv_type_of(a.kv_type);
  co.n_ctx = a.n_ctx > 0 ? a.n_ctx : static_cast<int32_t>(ids->size()) + a.n_predict;
  if (co.n_ctx > l.model->config().n_ctx_train) co.n_ctx = l.model->config().n_ctx_train;
  if (auto problem = check_prompt(*ids, co.n_ctx)) return fail(problem->message);
  TextCallback stream;
  if (!a.json)
    stream = [](std::string_view s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  // The scheduler's n_ctx counts the position of the token after the last, which generate() never runs.
  if (!a.draft_model.empty()) return generate_with_drafts(a, l, path, *ids, co.n_ctx + 1, stream);
  Result<std::unique_ptr<InferenceContext>> ctx = InferenceContext::create(*l.model, *l.backend, co);
  if (!ctx) return fail(ctx.error().message);

  GenerateOptions gen = a.gen;
  gen.max_tokens = a.n_predict;
  gen.sampling.seed = a.seed;
  Result<GenerateResult> r = generate(**ctx, *l.tokenizer, *ids, gen, stream);
  if (!r) return fail(r.error().message);
  print_result(*r, a.json);
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  using namespace hearth;
  CLI::App app{"hearth-run: run a GGUF model in-process (no daemon)"};
  Args a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);

  if (a.version) {
    std::printf("hearth-run %s\n", HEARTH_VERSION);
    return 0;
  }
  LogLevel level;
  if (!parse_log_level(a.log_level, &level)) return fail("unknown log level '" + a.log_level + "'");
  set_log_level(level);
  if (a.list) {
    std::fputs(daemon::list_devices(a.device.threads).c_str(), stdout);
    return 0;
  }
  if (a.read_probe) return run_read_probe(a.device.threads, a.json);
  if (!a.simd.empty()) {
    cpu::SimdLevel l;
    if (!cpu::parse_simd_level(a.simd, &l)) return fail("unknown SIMD level '" + a.simd + "'");
    cpu::set_simd_level(l);
  }
  if (!a.bench && a.prompt.empty()) return fail("nothing to do: give a prompt with -p (or --bench)");
  if (Status st = daemon::check_backend_available(a.device); !st) return fail(st.error().message, kExitUsage);

  Result<std::string> path = resolve_model(a.model);
  if (!path) return fail(path.error().message);
  Result<Loaded> l = load(a, *path);
  if (!l) return fail(l.error().message);
  if (!a.bench) return run_generate(a, *l, *path);
  BenchOptions bo = a.bo;
  bo.kv_type = kv_type_of(a.kv_type);
  bo.json = a.json;
  bo.threads = a.device.threads;
  if (a.draft_model.empty()) return run_bench(*l, *path, bo);
  // With drafts: the tokenizer and the draft model first, so that a mismatch fails early.
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*l->file);
  if (!tok) return fail(tok.error().message);
  l->tokenizer = std::move(*tok);
  Result<std::unique_ptr<LoadedDraft>> d = load_draft(*l, *path, a.draft_model);
  if (!d) return fail(d.error().message);
  if (int rc = run_bench(*l, *path, bo); rc != 0) return rc;
  return bench_drafts(*l, **d, bo);  // with --json, a second line: its own object
}
