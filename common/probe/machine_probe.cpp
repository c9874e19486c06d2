#include "common/probe/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hearth::probe {
namespace {

using Clock = std::chrono::steady_clock;

// Runs work(thread_index) on n threads at once; returns the wall seconds of the slowest.
template <class F>
double timed_parallel(int n, F work) {
  std::vector<std::thread> ts;
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { work(i); });
  for (std::thread& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The best of 3 rounds (the first pays for frequency ramp-up) of work(thread_index) on n
// threads, as `units` (operations or bytes, all threads together) per second / 10^9. work
// returns a checksum so that the compiler cannot drop it.
template <class F>
double best_rate(int n, double units, F work) {
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const double s = timed_parallel(n, [&](int t) { sink += static_cast<uint64_t>(work(t)); });
    best = std::max(best, units / s / 1e9);
  }
  return sink.load() == 42 ? best + 1e-12 : best;  // uses sink
}

// int8 dot products of a 4-row tile against 4 columns, K = 512: 8 KiB per operand, held
// in L1, so the loop is bound by multiply-add throughput. Returns a checksum so the work
// cannot be dropped. 2 ops per multiply-add. Compiled for several x86 levels, picked at
// load time, so the compiler's vectorised loop uses the widest multiply-adds the CPU has.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=icelake-server", "avx2", "default")))
#endif
int64_t
int8_tile(const int8_t* a, const int8_t* b, int reps) {
  constexpr int kK = 512;
  int64_t sum = 0;
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        int32_t acc = 0;
        const int8_t* x = a + i * kK;
        const int8_t* y = b + j * kK;
        for (int k = 0; k < kK; ++k) acc += static_cast<int16_t>(x[k]) * static_cast<int16_t>(y[k]);
        sum += acc;
      }
  }
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The int8 instruction's own rate: vpdpbusd (64 multiply-adds each) on 16 independent
// 512-bit accumulators, operands in registers, so nothing but its throughput binds. This is
// the ceiling a VNNI matrix kernel works against; the loop above is what plain vectorised
// C++ gets.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t vnni_loop(int64_t reps) {
  constexpr int kAcc = 16;
  __m512i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t r = 0; r < reps; ++r)
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
  int64_t sum = 0;
  for (int i = 0; i < kAcc; ++i) {
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, acc[i]);
    sum += lanes[0];
  }
  return sum;
}

double probe_vnni(int threads) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) return 0;
  constexpr int64_t kReps = 200000;  // 200000 x 16 x 64 = 205 M multiply-adds a thread a round
  return best_rate(threads, 2.0 * kReps * 16 * 64 * threads, [](int) { return vnni_loop(kReps); });
}
#else
double probe_vnni(int) {
  return 0;
}
#endif

double probe_int8(int threads) {
  constexpr int kK = 512, kReps = 4000;  // 4000 × 16 × 512 = 33 M multiply-adds a thread a round
  std::vector<int8_t> a(4 * kK), b(4 * kK);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>(i * 7), b[i] = static_cast<int8_t>(i * 13);
  return best_rate(threads, 2.0 * kReps * 16 * kK * threads, [&](int) { return int8_tile(a.data(), b.data(), kReps); });
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      return c == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', c + 1));
    }
  return "unknown";
}

// The cache file: one line per (cpu, threads) pair,
// "threads<TAB>int8_gops<TAB>read_gb_s<TAB>read_variant<TAB>cpu".
// v2: the read probe gained its prefetched loop. v3: the read probe searches streams,
// prefetch distances, load kinds and huge pages (common/probe/read_probe.h) and read
// 1.4-4x v2's figure on a Sapphire Rapids guest; no v2 figure is reused.
std::string cache_file(const std::string& dir) {
  return dir + "/machine-peaks-v3.tsv";
}

// Splits a cache line at tabs; false unless it has the 5 fields and positive figures.
bool parse_line(const std::string& line, MachinePeaks& p) {
  std::vector<std::string> f;
  std::istringstream ls(line);
  for (std::string field; std::getline(ls, field, '\t');) f.push_back(field);
  if (f.size() != 5) return false;
  char* end = nullptr;
  p.threads = static_cast<int>(std::strtol(f[0].c_str(), &end, 10));
  if (*end) return false;
  p.int8_gops = std::strtod(f[1].c_str(), &end);
  if (*end) return false;
  p.read_gb_s = std::strtod(f[2].c_str(), &end);
  if (*end) return false;
  p.read_variant = f[3];
  p.cpu = f[4];
  return p.threads > 0 && p.int8_gops > 0 && p.read_gb_s > 0 && std::isfinite(p.int8_gops) &&
         std::isfinite(p.read_gb_s);
}

}  // namespace

MachinePeaks measure_peaks(int threads, const ReadProbeOptions& read) {
  MachinePeaks p;
  p.threads = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  p.cpu = cpu_name();
  p.int8_gops = std::max(probe_int8(p.threads), probe_vnni(p.threads));
  const ReadProbeResult r = probe_read_bandwidth(p.threads, read);
  p.read_gb_s = r.best_gb_s;
  p.read_variant = r.best + (r.huge_pages ? ", 2 MiB pages" : "");
  return p;
}

MachinePeaks machine_peaks(const std::string& dir, int threads, bool reprobe, const ReadProbeOptions& read) {
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string cpu = cpu_name();
  std::vector<std::string> keep;
  if (!dir.empty()) {
    std::ifstream in(cache_file(dir));
    std::string line;
    while (std::getline(in, line)) {
      MachinePeaks p;
      if (!parse_line(line, p)) continue;  // a damaged line is dropped, and measured again if it is ours
      if (p.threads == n && p.cpu == cpu) {
        if (!reprobe) {
          p.from_cache = true;
          return p;
        }
        continue;  // replaced below
      }
      keep.push_back(line);
    }
  }
  MachinePeaks p = measure_peaks(n, read);
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string tmp = cache_file(dir) + ".tmp";
    std::ofstream out(tmp);
    for (const std::string& l : keep) out << l << '\n';
    out << p.threads << '\t' << p.int8_gops << '\t' << p.read_gb_s << '\t' << p.read_variant << '\t' << p.cpu << '\n';
    out.close();
    if (out) std::filesystem::rename(tmp, cache_file(dir), ec);
  }
  return p;
}

std::string default_probe_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hearth";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/hearth";
  return "";
}

}  // namespace hearth::probe
