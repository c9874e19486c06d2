// hearth-run --bench: prefill (pp) and decode (tg) throughput, reported like llama-bench
// as mean ± sample standard deviation over --reps runs after one warm-up run.
//   pp N: one fresh sequence, N prompt tokens in one eval (logits of the last token only),
//         in forward passes of --ubatch tokens (default 512).
//   tg N: one fresh sequence, N tokens evaluated one at a time from position 0.
// The tokens are random ids: no tokenizer is loaded.
// After the table: achieved prefill GOP/s (2 ops per weight per prompt token, the output
// projection aside: prefill takes logits of the last token only) and decode GB/s (every
// weight read once per token; KV reads left out) next to this machine's measured peaks
// (common/probe), so a figure reads as compute- or memory-bound and how far from the limit.
// A figure above a cached peak measures the peaks again once; one still above says the peak
// is a lower bound (common/probe/peak_report.h), never "over 100%".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "backends/cpu/vec_dot.h"
#include "common/probe/machine_probe.h"
#include "common/probe/peak_report.h"
#include "decode_ops.h"
#include "engine/model/context.h"
#include "engine/model/token_work.h"
#include "run.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

struct Stat {
  double mean = 0, stdev = 0;
};

Stat stats(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stdev = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return s;
}

// Seconds for one run of a test; -1 on error (printed).
double run_once(Loaded& l, bool prefill, int n, int ubatch, DType kv_type, std::mt19937& rng) {
  ContextOptions co;
  co.n_ctx = n + 1;
  co.kv_type = kv_type;
  if (ubatch > 0) co.n_batch = ubatch;  // else the default chunk (512), as the daemon's largest
  Result<std::unique_ptr<InferenceContext>> ctx = InferenceContext::create(*l.model, *l.backend, co);
  if (!ctx) {
    std::fprintf(stderr, "hearth-run: %s\n", ctx.error().message.c_str());
    return -1;
  }
  // Random ordinary tokens (not control ids); the numbers do not depend on content, so the
  // bench needs no tokenizer.
  // (Away from either end of the vocabulary, a small one too: 1000 past a 300-token one
  // was an empty range, undefined behaviour.)
  const int32_t n_vocab = l.model->config().n_vocab, edge = std::min(1000, n_vocab / 4);
  std::uniform_int_distribution<int32_t> pick(edge, n_vocab - 1 - edge);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = pick(rng);
  const Clock::time_point t0 = Clock::now();
  if (prefill) {
    if (Status s = (*ctx)->eval(tokens); !s) return -1;
  } else {
    for (int i = 0; i < n; ++i)
      if (Status s = (*ctx)->eval(std::span<const int32_t>(&tokens[i], 1)); !s) return -1;
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int run_bench(Loaded& l, const std::string& model_path, const BenchOptions& o) {
  const ModelConfig& c = l.model->config();
  const double size_gib = static_cast<double>(std::filesystem::file_size(model_path)) / (1 << 30);
  std::mt19937 rng(42);
  nlohmann::json results = nlohmann::json::array();
  double pp_tok_s = 0, tg_tok_s = 0;
  if (!o.json) {
    std::printf("| model | size | backend | test | t/s |\n");
    std::printf("| --- | ---: | --- | ---: | ---: |\n");
  }
  for (int pass = 0; pass < 2; ++pass) {
    const bool prefill = pass == 0;
    const int n = prefill ? o.pp : o.tg;
    if (n <= 0) continue;
    if (run_once(l, prefill, n, o.ubatch, o.kv_type, rng) < 0) return 1;  // warm-up: page in weights, size buffers
    std::vector<double> tok_s;
    for (int r = 0; r < o.reps; ++r) {
      const double sec = run_once(l, prefill, n, o.ubatch, o.kv_type, rng);
      if (sec < 0) return 1;
      tok_s.push_back(n / sec);
    }
    const Stat s = stats(tok_s);
    (prefill ? pp_tok_s : tg_tok_s) = s.mean;
    const std::string test = (prefill ? "pp" : "tg") + std::to_string(n);
    if (o.json) {
      results.push_back({{"test", test}, {"tok_s_mean", s.mean}, {"tok_s_stdev", s.stdev}, {"reps", o.reps}});
    } else {
      std::printf("| %s | %.2f GiB | %s | %s | %.2f ± %.2f |\n", c.name.c_str(), size_gib,
                  l.backend->info().name.c_str(), test.c_str(), s.mean, s.stdev);
      std::fflush(stdout);
    }
  }
  if (!o.json)
    std::fprintf(stderr, "hearth-run: this machine's peaks (%s)...\n",
                 o.reprobe ? "measuring" : "cached, or measured once");
  probe::MachinePeaks peaks = probe::machine_peaks(probe::default_probe_cache_dir(), o.threads, o.reprobe);
  const TokenWork w = token_work(*l.file);
  const double gops = pp_tok_s * w.prefill_ops / 1e9, gb_s = tg_tok_s * w.decode_bytes / 1e9;
  if (peaks.from_cache &&
      (probe::share_of_peak(gops, peaks.int8_gops).above || probe::share_of_peak(gb_s, peaks.read_gb_s).above)) {
    // A cached peak below what was just achieved: measured on a busier machine, or by an
    // older probe. Measure once more before reporting against it.
    std::fprintf(stderr, "hearth-run: warning: this run went past a cached peak; measuring the peaks again\n");
    peaks = probe::machine_peaks(probe::default_probe_cache_dir(), o.threads, true);
  }
  nlohmann::json ops;  // null unless --bench-ops
  if (o.ops_steps > 0 &&
      (ops = profile_decode_ops(l, o.ops_context >= 0 ? o.ops_context : o.tg, o.ops_steps, o.kv_type)).is_null())
    return 1;
  if (o.json) {
    std::cout << nlohmann::json{{"model", c.name},
                                {"backend", l.backend->info().name},
                                {"results", results},
                                {"prefill_gops", gops},
                                {"decode_gb_s", gb_s},
                                {"peaks",
                                 {{"int8_gops", peaks.int8_gops},
                                  {"read_gb_s", peaks.read_gb_s},
                                  {"read_variant", peaks.read_variant},
                                  {"threads", peaks.threads},
                                  {"cpu", peaks.cpu},
                                  {"cached", peaks.from_cache}}},
                                {"decode_ops", ops}}
                     .dump()
              << std::endl;
    return 0;
  }
  std::printf("\n");
  const std::string again = "hearth-run --bench --reprobe";
  // "...: compute-bound" only after a share; the lower-bound wording ends the line itself.
  auto bound = [](double got, double peak, const char* what) {
    return probe::share_of_peak(got, peak).above ? std::string() : std::string(": ") + what;
  };
  if (pp_tok_s > 0)
    std::printf("prefill: %s, %d threads%s\n",
                probe::against_peak(gops, peaks.int8_gops, "GOP/s", "int8 peak", again).c_str(), peaks.threads,
                bound(gops, peaks.int8_gops, "compute-bound").c_str());
  if (pp_tok_s > 0 && cpu::active_simd_level() == cpu::SimdLevel::AMX && l.backend->info().kind == "cpu")
    std::printf("prefill: %s, %d threads (the tiles' own rate, measured now)\n",
                probe::against_peak(gops, cpu::amx_int8_gops(peaks.threads), "GOP/s", "AMX int8 peak", "").c_str(),
                peaks.threads);
  if (tg_tok_s > 0)
    std::printf("decode:  %s%s\n",
                probe::against_peak(gb_s, peaks.read_gb_s, "GB/s", "memory read peak", again).c_str(),
                bound(gb_s, peaks.read_gb_s, "memory-bound").c_str());
  if (!ops.is_null()) print_decode_ops(ops, peaks.read_gb_s);
  return 0;
}

int run_read_probe(int threads, bool json) {
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const probe::ReadProbeResult r = probe::probe_read_bandwidth(n);
  if (json) {
    nlohmann::json vs = nlohmann::json::array();
    for (const probe::ReadVariantResult& v : r.variants) vs.push_back({{"variant", v.name}, {"gb_s", v.gb_s}});
    std::cout << nlohmann::json{{"threads", r.threads}, {"bytes", r.bytes},         {"huge_pages", r.huge_pages},
                                {"best", r.best},       {"best_gb_s", r.best_gb_s}, {"variants", vs}}
                     .dump()
              << std::endl;
    return r.best_gb_s > 0 ? 0 : 1;
  }
  std::printf("memory read, %d threads, %zu MiB buffer, %s; best of 3 runs each:\n", r.threads, r.bytes >> 20,
              r.huge_pages ? "2 MiB pages" : "4 KiB pages (no huge pages given)");
  std::printf("| variant | GB/s |\n| --- | ---: |\n");
  for (const probe::ReadVariantResult& v : r.variants) std::printf("| %s | %.2f |\n", v.name.c_str(), v.gb_s);
  std::printf("fastest: %s, %.2f GB/s\n", r.best.c_str(), r.best_gb_s);
  return r.best_gb_s > 0 ? 0 : 1;
}

}  // namespace hearth
