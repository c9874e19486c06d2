// Reference logits for hearth's synthetic models straight from libllama, for machines where
// llama-cpp-python (make_synthetic_fixtures.py) is not installed. Same fixture format and
// same measurements as that script: every position's full logit row for a tokenized text,
// a lone BOS, 23 random tokens after BOS and 40 without, plus 16 greedy tokens after the
// text with llama.cpp's top-2 gaps. The random tokens come from splitmix64 (seed 1234), not
// numpy, so they differ from the older fixtures' (the test reads them from the fixture).
//
// Not part of hearth's build (a test oracle only):
//   c++ -O2 -std=c++17 tests/reference/llamacpp_synthetic_logits.cpp -I$LLAMA/include \
//       -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama -Wl,-rpath,$LLAMA/build/bin \
//       -DORACLE="\"llama.cpp $(git -C $LLAMA rev-parse --short HEAD)\"" -o oracle
//   ./oracle build/tests/tools/hearth-make-synthetic qwen3 f32:1 q8_0:2 \
//       > tests/fixtures/synthetic_qwen3_reference.json
//   ./oracle build/tests/tools/hearth-make-synthetic qwen3moe f32:1 q8_0:2 \
//       > tests/fixtures/synthetic_qwen3moe_reference.json
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// The oracle's name in the fixture: -DORACLE='"llama.cpp <commit>"'.
#ifndef ORACLE
#define ORACLE "libllama"
#endif

namespace {

const char* kText =
    "the cat sat on the mat, and it is the end of it. \xC3\x9Cn\xC3\xAF"
    "code ok?";
constexpr int kGen = 16, kThreads = 2;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) std::exit(1);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) std::exit(1);
  return out;
}

void print_tokens(const std::vector<llama_token>& t) {
  std::printf("[");
  for (size_t i = 0; i < t.size(); ++i) std::printf("%s%d", i ? "," : "", t[i]);
  std::printf("]");
}

// Evaluates `toks` from position 0 of a fresh memory; every position's logits.
std::vector<std::vector<float>> eval_all(llama_context* ctx, const std::vector<llama_token>& toks, int n_vocab) {
  llama_memory_clear(llama_get_memory(ctx), true);
  llama_batch b = llama_batch_init(static_cast<int32_t>(toks.size()), 0, 1);
  for (size_t i = 0; i < toks.size(); ++i) {
    b.token[i] = toks[i];
    b.pos[i] = static_cast<llama_pos>(i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = static_cast<int32_t>(toks.size());
  if (llama_decode(ctx, b) != 0) std::exit(2);
  llama_batch_free(b);
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < toks.size(); ++i) {
    const float* l = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    rows.emplace_back(l, l + n_vocab);
  }
  return rows;
}

std::vector<float> step(llama_context* ctx, llama_token t, llama_pos pos, int n_vocab) {
  llama_batch b = llama_batch_init(1, 0, 1);
  b.token[0] = t, b.pos[0] = pos, b.n_seq_id[0] = 1, b.seq_id[0][0] = 0, b.logits[0] = 1;
  b.n_tokens = 1;
  if (llama_decode(ctx, b) != 0) std::exit(2);
  llama_batch_free(b);
  const float* l = llama_get_logits_ith(ctx, 0);
  return std::vector<float>(l, l + n_vocab);
}

void model_entry(const std::string& tool, const std::string& arch, const std::string& type, const std::string& seed) {
  const std::string path = "/tmp/llamacpp_synthetic_" + arch + "_" + type + ".gguf";
  const std::string made = run(tool + " --arch " + arch + " --type " + type + " --seed " + seed + " --out " + path);
  const std::string hash = made.substr(made.find(' ') + 1, 32);
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) std::exit(3);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 128, cp.n_batch = 128, cp.n_ubatch = 128, cp.n_threads = kThreads, cp.n_threads_batch = kThreads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  // as llama-cpp-python, which made the other fixtures
  llama_context* ctx = llama_init_from_model(model, cp);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  std::vector<llama_token> text(256);
  text.resize(
      llama_tokenize(vocab, kText, static_cast<int32_t>(std::string(kText).size()), text.data(), 256, true, false));
  uint64_t rng = 1234;
  auto draw = [&](int n, std::vector<llama_token> v) {
    for (int i = 0; i < n; ++i) v.push_back(static_cast<llama_token>(3 + splitmix(rng) % (n_vocab - 3)));
    return v;
  };
  const llama_token bos = llama_vocab_bos(vocab);
  const std::vector<std::pair<const char*, std::vector<llama_token>>> seqs = {
      {"text", text}, {"bos_only", {bos}}, {"random_24", draw(23, {bos})}, {"random_40_no_bos", draw(40, {})}};

  std::printf("{\"args\":[\"--arch\",\"%s\",\"--type\",\"%s\",\"--seed\",\"%s\"],\"gguf_xxh3_128\":\"%s\",",
              arch.c_str(), type.c_str(), seed.c_str(), hash.c_str());
  std::printf("\"n_vocab\":%d,\"text\":\"%s\",\"sequences\":[", n_vocab, kText);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto& [name, toks] = seqs[s];
    const auto rows = eval_all(ctx, toks, n_vocab);
    std::printf("%s{\"name\":\"%s\",\"tokens\":", s ? "," : "", name);
    print_tokens(toks);
    std::printf(",\"logits\":[");
    for (size_t i = 0; i < rows.size(); ++i) {
      std::printf("%s[", i ? "," : "");
      for (int j = 0; j < n_vocab; ++j) std::printf("%s%.4f", j ? "," : "", rows[i][j]);
      std::printf("]");
    }
    std::printf("]");
    if (s == 0) {  // greedy continuation of the text
      std::vector<llama_token> gen;
      std::vector<float> gaps, row = rows.back();
      for (int i = 0; i < kGen; ++i) {
        std::vector<int> idx(n_vocab);
        for (int j = 0; j < n_vocab; ++j) idx[j] = j;
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return row[a] > row[b]; });
        gen.push_back(idx[0]);
        gaps.push_back(row[idx[0]] - row[idx[1]]);
        row = step(ctx, idx[0], static_cast<llama_pos>(toks.size() + i), n_vocab);
      }
      std::printf(",\"generated\":");
      print_tokens(gen);
      std::printf(",\"top2_gap\":[");
      for (size_t i = 0; i < gaps.size(); ++i) std::printf("%s%.4f", i ? "," : "", gaps[i]);
      std::printf("]");
    }
    std::printf("}");
    std::fprintf(stderr, "%s/%s %s: %zu tokens\n", arch.c_str(), type.c_str(), name, toks.size());
  }
  std::printf("]}");
  llama_free(ctx);
  llama_model_free(model);
  std::remove(path.c_str());
}

void quiet(ggml_log_level, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s HEARTH_MAKE_SYNTHETIC ARCH TYPE:SEED...\n", argv[0]);
    return 1;
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  std::printf("{\"generator\":\"tests/reference/llamacpp_synthetic_logits.cpp\",\"oracle\":\"%s\",", ORACLE);
  std::printf("\"n_threads\":%d,\"models\":[", kThreads);
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i > 3) std::printf(",");
    model_entry(argv[1], argv[2], a.substr(0, a.find(':')), a.substr(a.find(':') + 1));
  }
  std::printf("]}\n");
  llama_backend_free();
  return 0;
}
