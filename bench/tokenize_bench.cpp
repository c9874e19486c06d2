// Tokenizer throughput (not a test): encodes a text file with a model's tokenizer and reports
// MB/s of input text, best of N runs, special tokens parsed (as llama.cpp's /tokenize does).
//   tokenize_bench MODEL.gguf TEXT_FILE [--runs N] [--ids]
// --ids prints the ids of the text instead (one line, space-separated), for comparisons.
// bench/tokenize_bench.py runs llama-cpp-python on the same file for the figure to compare.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TEXT_FILE [--runs N] [--ids]\n", argv[0]);
    return 2;
  }
  int runs = 5;
  bool ids = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--ids"))
      ids = true;
  }
  auto file = hearth::gguf::File::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.error().message.c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto tok = hearth::Tokenizer::from_gguf(**file);
  auto t1 = std::chrono::steady_clock::now();
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (ids) {
    for (int32_t id : (*tok)->encode(text, false, true)) std::printf("%d ", id);
    std::printf("\n");
    return 0;
  }
  double best_s = 1e30;
  size_t n_tokens = 0;
  for (int r = 0; r < runs; ++r) {
    auto a = std::chrono::steady_clock::now();
    n_tokens = (*tok)->encode(text, false, true).size();
    auto b = std::chrono::steady_clock::now();
    best_s = std::min(best_s, std::chrono::duration<double>(b - a).count());
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("load %.1f ms; %.2f MB -> %zu tokens; best of %d: %.1f ms = %.2f MB/s, %.0f tokens/s\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(), mb, n_tokens, runs, best_s * 1e3, mb / best_s,
              static_cast<double>(n_tokens) / best_s);
  return 0;
}
