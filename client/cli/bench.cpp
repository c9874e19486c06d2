// hearth bench: the physics on this machine, through the daemon. Three measurements:
//   1. TTFT against prompt length: cold (nothing cached), memory hit (the same prompt
//      again), disk hit (the same prompt after the daemon restarted; only with --model,
//      where the bench owns the daemon and can restart it);
//   2. ITL against context length: the gaps between tokens of an answer to a long prompt;
//   3. aggregate tokens/s against the number of concurrent streams.
// Tables to stdout, progress to stderr, --json raw figures, --plot an SVG chart.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "common/probe/peak_report.h"
#include "svg.h"

namespace hearth::cli {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// A hearthd this command started (--model) on a socket and cache folder of its own.
class PrivateDaemon {
 public:
  ~PrivateDaemon() { stop(); }
  bool start(const BenchOptions& o) {
    if (dir_.empty()) {
      char tmpl[] = "/tmp/hearth-bench-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) return false;
      dir_ = tmpl;
    }
    std::vector<std::string> args = {o.hearthd,     "--model",       o.model,       "--socket", socket(),
                                     "--cache-dir", dir_ + "/cache", "--log-level", "warn"};
    for (const std::string& a : o.hearthd_args) args.push_back(a);
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "hearth bench: cannot run %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    // Ready once /health answers OK; a daemon that exits (bad model file) ends the wait, and
    // so does one still loading after 10 minutes.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    for (;;) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "hearth bench: hearthd was not ready after 10 minutes\n");
        stop();
        return false;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        std::fprintf(stderr, "hearth bench: hearthd exited before it was ready\n");
        return false;
      }
      hearth_client* c = nullptr;
      if (hearth_client_open(socket().c_str(), &c) == HEARTH_OK) {
        const int rc = hearth_client_health(c);
        hearth_client_close(c);
        if (rc == HEARTH_OK) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void remove() {
    stop();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string socket() const { return dir_ + "/hearth.sock"; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A prompt of about n_words words no earlier prompt starts with (the salt leads).
std::string prompt_text(const std::string& salt, int64_t n_words) {
  std::string s = salt + " bench:";
  static const char* kWords[] = {"river", "stone", "lamp", "north", "window", "garden", "copper", "quiet"};
  for (int64_t i = 0; i < n_words; ++i)
    s += std::string(" ") + kWords[(i * 5 + salt.size()) % 8] + std::to_string(i % 97);
  return s;
}

struct Runner {
  const BenchOptions& o;
  std::string socket;
  int salt = 0;
  double tokens_per_word = 3;  // calibrated by the first request
  int step = 0, n_steps = 0;

  // One line per measurement; on a terminal, each replaces the last.
  void progress(const std::string& what) {
    std::fprintf(stderr, isatty(STDERR_FILENO) ? "\r[%d/%d] %-60s" : "[%d/%d] %s\n", ++step, n_steps, what.c_str());
    std::fflush(stderr);
  }

  // One completion on its own connection; false (message printed) when it failed.
  bool complete(const std::string& prompt, int32_t max_tokens, hearth_stats* stats) {
    Client client;
    GlobalOptions g{socket};
    if (!client.open(g)) return false;
    hearth_request_options r;
    hearth_request_options_init(&r);
    r.max_tokens = max_tokens;
    r.temperature = 0;
    hearth_stats_init(stats);
    const int rc = hearth_client_complete(client.get(), prompt.c_str(), &r, nullptr, nullptr, nullptr, stats);
    if (rc != HEARTH_OK) {
      std::fprintf(stderr, "\nhearth bench: a request failed: %s (%s)\n", hearth_strerror(rc),
                   hearth_client_last_error(client.get()));
      return false;
    }
    return true;
  }
  std::string fresh(int64_t tokens) {
    return prompt_text(std::to_string(++salt) + "-" + std::to_string(getpid()),
                       std::max<int64_t>(1, static_cast<int64_t>(tokens / tokens_per_word)));
  }
};

Json row(const hearth_stats& s) {
  return {{"prompt_tokens", s.prompt_tokens}, {"completion_tokens", s.completion_tokens},
          {"cached_tokens", s.cached_tokens}, {"ttft_ms", s.ttft_ms},
          {"prefill_tok_s", s.prefill_tok_s}, {"decode_tok_s", s.decode_tok_s},
          {"itl_mean_ms", s.itl_mean_ms},     {"itl_p50_ms", s.itl_p50_ms},
          {"itl_max_ms", s.itl_max_ms},       {"total_ms", s.total_ms},
          {"prefill_gops", s.prefill_gops},   {"decode_gb_s", s.decode_gb_s},
          {"draft_tokens", s.draft_tokens},   {"accepted_tokens", s.accepted_tokens}};
}

void print_tables(const Json& j) {
  std::printf("TTFT against prompt length (ms)\n%8s %10s %10s %10s\n", "tokens", "cold", "memory", "disk");
  for (const Json& r : j["ttft"]) {
    auto cell = [&](const char* k) {
      char b[32];
      if (r.contains(k))
        std::snprintf(b, sizeof b, "%10.1f", r[k]["ttft_ms"].get<double>());
      else
        std::snprintf(b, sizeof b, "%10s", "-");
      return std::string(b);
    };
    std::printf("%8lld %s %s %s\n", r["tokens"].get<long long>(), cell("cold").c_str(), cell("memory").c_str(),
                cell("disk").c_str());
  }
  std::printf("\nITL against context length (ms)\n%8s %10s %10s %10s %10s\n", "context", "mean", "p50", "max", "tok/s");
  for (const Json& r : j["itl"])
    std::printf("%8lld %10.1f %10.1f %10.1f %10.1f\n", r["context"].get<long long>(), r["itl_mean_ms"].get<double>(),
                r["itl_p50_ms"].get<double>(), r["itl_max_ms"].get<double>(), r["decode_tok_s"].get<double>());
  std::printf("\nAggregate throughput against concurrent streams\n%8s %10s %12s\n", "streams", "tok/s", "per stream");
  for (const Json& r : j["streams"])
    std::printf("%8lld %10.1f %12.1f\n", r["streams"].get<long long>(), r["tok_s"].get<double>(),
                r["tok_s"].get<double>() / r["streams"].get<double>());
  // The longest cold prompt's prefill and the shortest context's decode, against the peaks.
  const Json& peaks = j["peaks"];
  std::printf("\nAgainst this machine's peaks (%d threads)\n", peaks["threads"].get<int>());
  // Never over 100%: a figure above a peak says the peak is a lower bound (peak_report.h).
  const std::string again = "hearth bench --reprobe";
  if (!j["ttft"].empty()) {
    const double g = j["ttft"].back()["cold"]["prefill_gops"].get<double>(), peak = peaks["int8_gops"].get<double>();
    std::printf("prefill %s%s\n", probe::against_peak(g, peak, "GOP/s", "int8 peak", again).c_str(),
                probe::share_of_peak(g, peak).above ? "" : ": compute-bound");
  }
  if (!j["itl"].empty()) {
    const double b = j["itl"][0]["decode_gb_s"].get<double>(), peak = peaks["read_gb_s"].get<double>();
    std::printf("decode  %s%s\n", probe::against_peak(b, peak, "GB/s", "memory read peak", again, 2).c_str(),
                probe::share_of_peak(b, peak).above ? "" : ": memory-bound");
  }
}

std::string plot(const Json& j) {
  Chart ttft{"TTFT vs prompt length", "prompt tokens", "ms", {}};
  for (const char* tier : {"cold", "memory", "disk"}) {
    Series s{tier, {}};
    for (const Json& r : j["ttft"])
      if (r.contains(tier)) s.points.push_back({r["tokens"].get<double>(), r[tier]["ttft_ms"].get<double>()});
    if (!s.points.empty()) ttft.series.push_back(s);
  }
  Chart itl{"ITL vs context length", "context tokens", "ms", {{"mean", {}}, {"max", {}}}};
  for (const Json& r : j["itl"]) {
    itl.series[0].points.push_back({r["context"].get<double>(), r["itl_mean_ms"].get<double>()});
    itl.series[1].points.push_back({r["context"].get<double>(), r["itl_max_ms"].get<double>()});
  }
  Chart streams{"Throughput vs streams", "concurrent streams", "tokens/s", {{"all streams", {}}}};
  for (const Json& r : j["streams"])
    streams.series[0].points.push_back({r["streams"].get<double>(), r["tok_s"].get<double>()});
  return svg_charts({ttft, itl, streams});
}

}  // namespace

int run_bench(const GlobalOptions& global, const BenchOptions& o) {
  PrivateDaemon daemon;
  Runner run{o, global.socket};
  if (!o.model.empty()) {
    std::fprintf(stderr, "hearth bench: starting %s --model %s\n", o.hearthd.c_str(), o.model.c_str());
    if (!daemon.start(o)) return kExitError;
    run.socket = daemon.socket();
  } else {
    Client probe;
    if (!probe.open(global)) return kExitError;
    if (const int rc = hearth_client_health(probe.get()); rc != HEARTH_OK) return report_error(probe.get(), rc);
  }
  run.n_steps = 2 + static_cast<int>(o.lengths.size()) * (o.model.empty() ? 2 : 3) +
                static_cast<int>(o.contexts.size() + o.streams.size());
  Json out = {{"ttft", Json::array()}, {"itl", Json::array()}, {"streams", Json::array()}};
  hearth_stats s;

  // Calibrate words to tokens: the daemon's tokenizer is the only one that counts.
  run.progress("calibrating prompt length");
  const std::string sample = run.fresh(200);
  if (!run.complete(sample, 1, &s)) return kExitError;
  const int64_t words = static_cast<int64_t>(200 / run.tokens_per_word);
  run.tokens_per_word = std::max(0.1, static_cast<double>(s.prompt_tokens) / static_cast<double>(words + 2));

  // 1. TTFT: cold, then the same prompt again from memory.
  std::vector<std::string> prompts;
  for (int64_t n : o.lengths) {
    prompts.push_back(run.fresh(n));
    Json r = {{"tokens", n}};
    run.progress("TTFT, " + std::to_string(n) + " tokens, cold");
    if (!run.complete(prompts.back(), 1, &s)) return kExitError;
    r["tokens"] = s.prompt_tokens;
    r["cold"] = row(s);
    run.progress("TTFT, " + std::to_string(n) + " tokens, memory hit");
    if (!run.complete(prompts.back(), 1, &s)) return kExitError;
    r["memory"] = row(s);
    out["ttft"].push_back(r);
  }
  // ... and from disk, after a restart of the daemon this command owns.
  if (!o.model.empty()) {
    daemon.stop();
    if (!daemon.start(o)) return kExitError;
    for (size_t i = 0; i < prompts.size(); ++i) {
      run.progress("TTFT, " + std::to_string(o.lengths[i]) + " tokens, disk hit");
      if (!run.complete(prompts[i], 1, &s)) return kExitError;
      out["ttft"][i]["disk"] = row(s);
    }
  }

  // 2. ITL against context length: an answer of o.tokens tokens after a prompt of that size.
  for (int64_t n : o.contexts) {
    run.progress("ITL at " + std::to_string(n) + " tokens of context");
    if (!run.complete(run.fresh(n), o.tokens, &s)) return kExitError;
    Json r = row(s);
    r["context"] = s.prompt_tokens;
    out["itl"].push_back(r);
  }

  // 3. Concurrent streams: n clients at once, each a short prompt and o.tokens tokens.
  for (int64_t n : o.streams) {
    run.progress(std::to_string(n) + " concurrent streams");
    std::vector<hearth_stats> each(static_cast<size_t>(n));
    std::vector<std::string> ps;
    for (int64_t i = 0; i < n; ++i) ps.push_back(run.fresh(32));
    std::vector<char> ok(static_cast<size_t>(n), 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < n; ++i) threads.emplace_back([&, i] { ok[i] = run.complete(ps[i], o.tokens, &each[i]); });
    for (std::thread& t : threads) t.join();
    const double wall_s = seconds_since(t0);
    int64_t tokens = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!ok[i]) return kExitError;
      tokens += each[i].completion_tokens;
    }
    out["streams"].push_back({{"streams", n}, {"tokens", tokens}, {"wall_s", wall_s}, {"tok_s", tokens / wall_s}});
  }
  run.progress("this machine's peaks");
  const probe::MachinePeaks peaks = machine_peaks(o.reprobe);
  out["peaks"] = {{"int8_gops", peaks.int8_gops},
                  {"read_gb_s", peaks.read_gb_s},
                  {"read_variant", peaks.read_variant},
                  {"threads", peaks.threads},
                  {"cpu", peaks.cpu},
                  {"cached", peaks.from_cache}};
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%-70s\r", "");
  daemon.remove();

  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_tables(out);
  }
  if (!o.plot.empty()) {
    std::ofstream f(o.plot);
    f << plot(out);
    if (!f) {
      std::fprintf(stderr, "hearth bench: cannot write %s\n", o.plot.c_str());
      return kExitError;
    }
    std::fprintf(stderr, "hearth bench: chart written to %s\n", o.plot.c_str());
  }
  return kExitOk;
}

void add_bench_command(CLI::App* app, BenchOptions* o, CLI::App** out) {
  CLI::App* cmd =
      app->add_subcommand("bench", "measure TTFT (cold, memory and disk hits), ITL and throughput on this machine");
  cmd->add_option("--model", o->model,
                  "start a private hearthd with this model (file or catalog name) instead of using the running one; "
                  "only then is the disk-hit TTFT measured (the bench restarts its daemon)");
  cmd->add_option("--hearthd", o->hearthd, "the hearthd to start with --model (default: hearthd on the PATH)");
  cmd->add_option("--hearthd-arg", o->hearthd_args, "an extra argument for that hearthd (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--lengths", o->lengths, "prompt lengths for the TTFT table (tokens)")->delimiter(',');
  cmd->add_option("--contexts", o->contexts, "context lengths for the ITL table (tokens)")->delimiter(',');
  cmd->add_option("--streams", o->streams, "numbers of concurrent streams")->delimiter(',');
  cmd->add_option("--tokens", o->tokens, "tokens generated per answer in the ITL and streams runs")
      ->check(CLI::Range(2, 4096));
  cmd->add_flag("--json", o->json, "print the raw figures as JSON instead of tables");
  cmd->add_flag("--reprobe", o->reprobe,
                "measure this machine's int8 and memory read peaks again (they are kept in the cache folder)");
  cmd->add_option("--plot", o->plot, "also draw the three measurements into this SVG file");
  *out = cmd;
}

}  // namespace hearth::cli
