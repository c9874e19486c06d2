// This machine's limits, measured: a short int8 multiply-add probe (what a quantized
// prefill's matrix products do, bound by compute) and a STREAM-like read probe (what decode
// does with the weights, bound by memory bandwidth). Run once, remembered in the cache
// folder (machine-peaks-v2.tsv), so hearth-run --bench can print achieved GOP/s and GB/s
// next to these peaks. A leaf library: no hearth dependencies, usable by the CLI and tools.
//
// The figures are rough peaks on `threads` threads: the int8 one is the larger of a plain
// C++ loop the compiler vectorises and, where the CPU has AVX-512 VNNI, vpdpbusd on
// registers (the instruction's own rate); the read one the larger of a plain summing loop
// and the same with a software prefetch ahead, as the decode kernels read. They are for
// "how far from the limit", not for ranking machines.
#pragma once

#include <string>

namespace hearth::probe {

struct MachinePeaks {
  double int8_gops = 0;     // int8 multiply-adds ×2 per second, all threads (10^9 op/s)
  double read_gb_s = 0;     // bytes read per second from a buffer far larger than the caches (10^9 B/s)
  int threads = 0;          // threads the probes ran on
  std::string cpu;          // /proc/cpuinfo's model name; the cache is kept per CPU and thread count
  bool from_cache = false;  // read back from the cache file rather than measured now
};

// Runs both probes now (about a second in all) on `threads` threads (0: every CPU).
MachinePeaks measure_peaks(int threads);

// The peaks remembered in cache_dir/machine-peaks-v2.tsv for this CPU and thread count, or
// measured and written there (reprobe: measure and overwrite). An empty cache_dir, or one
// that cannot be written, only skips the remembering.
MachinePeaks machine_peaks(const std::string& cache_dir, int threads, bool reprobe);

// $XDG_CACHE_HOME/hearth, else ~/.cache/hearth ("" when neither is known).
std::string default_probe_cache_dir();

}  // namespace hearth::probe
