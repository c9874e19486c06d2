#include "decode_ops.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "backends/op_profile.h"
#include "common/probe/peak_report.h"
#include "engine/model/context.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

// Mean seconds of `steps` one-token evals on ctx; -1 on error.
double decode_steps(InferenceContext& ctx, int steps, std::mt19937& rng, int32_t n_vocab) {
  std::uniform_int_distribution<int32_t> pick(1000, n_vocab - 1000);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    const int32_t t = pick(rng);
    if (!ctx.eval(std::span<const int32_t>(&t, 1))) return -1;
  }
  return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
}

}  // namespace

nlohmann::json profile_decode_ops(Loaded& l, int context, int steps, DType kv_type) {
  ProfilingBackend prof(*l.backend);
  ContextOptions co;
  co.n_ctx = context + 2 * steps + 1;
  co.kv_type = kv_type;
  Result<std::unique_ptr<InferenceContext>> ctx = InferenceContext::create(*l.model, prof, co);
  if (!ctx) {
    std::fprintf(stderr, "hearth-run: %s\n", ctx.error().message.c_str());
    return nullptr;
  }
  const int32_t n_vocab = l.model->config().n_vocab;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(1000, n_vocab - 1000);
  std::vector<int32_t> prompt(context);
  for (int32_t& t : prompt) t = pick(rng);
  if (context > 0 && !(*ctx)->eval(prompt)) return nullptr;
  const double step_s = decode_steps(**ctx, steps, rng, n_vocab);
  prof.set_recording(true);
  const double profiled_s = decode_steps(**ctx, steps, rng, n_vocab);
  prof.set_recording(false);
  if (step_s < 0 || profiled_s < 0) return nullptr;
  nlohmann::json ops = nlohmann::json::array();
  double step_bytes = 0;
  for (const OpProfileRow& r : prof.rows()) {
    const double n = static_cast<double>(prof.graphs());
    ops.push_back({{"group", r.group},
                   {"ops_per_step", static_cast<double>(r.ops) / n},
                   {"ms_per_step", 1e3 * r.seconds / n},
                   {"bytes_per_step", r.bytes / n}});
    step_bytes += r.bytes / n;
  }
  return {{"context", context},       {"steps", steps},
          {"step_ms", 1e3 * step_s},  {"profiled_step_ms", 1e3 * profiled_s},
          {"step_bytes", step_bytes}, {"ops", ops}};
}

void print_decode_ops(const nlohmann::json& p, double read_peak_gb_s) {
  const double step_ms = p["step_ms"].get<double>(), step_mb = p["step_bytes"].get<double>() / 1e6;
  std::printf(
      "\ndecode step op by op: context %d, mean of %d steps; %.2f ms a step (%.2f ms with every op timed), "
      "%.1f MB moved = %s\n",
      p["context"].get<int>(), p["steps"].get<int>(), step_ms, p["profiled_step_ms"].get<double>(), step_mb,
      probe::against_peak(step_mb / step_ms, read_peak_gb_s, "GB/s", "memory read peak", "hearth-run --bench --reprobe")
          .c_str());
  std::printf("| op (weight type, rows x cols) | ops | ms | share | MB | GB/s | of read peak |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const double total_ms = p["profiled_step_ms"].get<double>();
  for (const nlohmann::json& r : p["ops"]) {
    const double ms = r["ms_per_step"].get<double>(), mb = r["bytes_per_step"].get<double>() / 1e6;
    const double gb_s = ms > 0 ? mb / ms : 0;
    const probe::PeakShare s = probe::share_of_peak(gb_s, read_peak_gb_s);
    const std::string of_peak = !s.known  ? "-"
                                : s.above ? "above (peak a lower bound)"
                                          : std::to_string(s.percent) + "%";
    std::printf("| %s | %.0f | %.3f | %.0f%% | %.2f | %.1f | %s |\n", r["group"].get<std::string>().c_str(),
                r["ops_per_step"].get<double>(), ms, total_ms > 0 ? 100 * ms / total_ms : 0.0, mb, gb_s,
                of_peak.c_str());
  }
}

}  // namespace hearth
