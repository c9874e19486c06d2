// This machine's limits, measured: a short int8 multiply-add probe (what a quantized
// prefill's matrix products do, bound by compute) and a STREAM-like read probe (what decode
// does with the weights, bound by memory bandwidth). Run once, remembered in the cache
// folder (machine-peaks-v3.tsv), so hearth-run --bench can print achieved GOP/s and GB/s
// next to these peaks (common/probe/peak_report.h words that). A leaf library: no hearth
// dependencies, usable by the CLI and tools.
//
// The figures are rough peaks on `threads` threads: the int8 one is the larger of a plain
// C++ loop the compiler vectorises and, where the CPU has AVX-512 VNNI, vpdpbusd on
// registers (the instruction's own rate); the read one the fastest of a dozen ways to read
// a buffer past the last-level cache (common/probe/read_probe.h). Both are measurements,
// so lower bounds of the true limits. They are for "how far from the limit", not for
// ranking machines.
#pragma once

#include <string>

#include "common/probe/read_probe.h"

namespace hearth::probe {

struct MachinePeaks {
  double int8_gops = 0;      // int8 multiply-adds ×2 per second, all threads (10^9 op/s)
  double read_gb_s = 0;      // bytes read per second from a buffer far larger than the caches (10^9 B/s)
  int threads = 0;           // threads the probes ran on
  std::string read_variant;  // how the fastest read was done, e.g. "avx2 x2, 2 MiB pages"
  std::string cpu;           // /proc/cpuinfo's model name; the cache is kept per CPU and thread count
  bool from_cache = false;   // read back from the cache file rather than measured now
};

// Runs both probes now on `threads` threads (0: every CPU): a few seconds with the default
// read options (most of it the kernel handing out the 2 MiB pages of a ~1 GiB buffer).
MachinePeaks measure_peaks(int threads, const ReadProbeOptions& read = {});

// The peaks remembered in cache_dir/machine-peaks-v3.tsv for this CPU and thread count, or
// measured and written there (reprobe: measure and overwrite). An empty cache_dir, or one
// that cannot be written, only skips the remembering. `read` only matters when measuring.
MachinePeaks machine_peaks(const std::string& cache_dir, int threads, bool reprobe, const ReadProbeOptions& read = {});

// $XDG_CACHE_HOME/hearth, else ~/.cache/hearth ("" when neither is known).
std::string default_probe_cache_dir();

}  // namespace hearth::probe
