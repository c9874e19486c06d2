// How fast this machine can read memory: the ceiling a memory-bound decode step works
// against. Every weight and every KV entry is read once per decode step, so the best
// achievable read of a buffer far larger than the last-level cache, on the same number of
// threads, is what "x% of the peak" must be measured against.
//
// "Best achievable" is searched, not assumed: the buffer is asked for 2 MiB pages
// (madvise(MADV_HUGEPAGE), where the kernel gives them), each thread reads its own slice
// in one or several independent streams (more misses in flight per core), with and
// without a software prefetch at a few distances, with plain and with non-temporal
// (vmovntdqa) loads, as wide as the CPU reads (AVX-512, AVX2, or what the compiler makes
// of plain C++); every variant runs `reps` times and the fastest run of the fastest
// variant is the figure. It is still a measurement, so a lower bound of the true ceiling:
// reports that find an achieved figure above it say so instead of printing over 100%
// (common/probe/peak_report.h).
//
// Threads: n threads (the caller one of them) are started, then released together; the
// time runs from the release to the last one's finish, so thread start-up is not counted.
// A leaf library: it cannot use the CPU backend's pool (the CLI links it too), and a read
// of this size gains nothing from a pool's task claiming.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hearth::probe {

struct ReadProbeOptions {
  size_t bytes = 0;  // buffer size; 0: default_read_probe_bytes()
  int reps = 3;      // runs of each variant; the fastest counts (the first pays for page and frequency warm-up)
};

struct ReadVariantResult {
  std::string name;  // e.g. "avx512 x4 streams, prefetcht0 +1024 B"
  double gb_s = 0;   // fastest run, 10^9 bytes/s, all threads together
};

struct ReadProbeResult {
  double best_gb_s = 0;                     // the fastest variant's figure
  std::string best;                         // its name
  std::vector<ReadVariantResult> variants;  // every variant run, in run order
  size_t bytes = 0;                         // buffer size read per run
  int threads = 0;
  bool huge_pages = false;  // at least half the buffer got 2 MiB pages (/proc/self/smaps)
};

// The default buffer: twice the last-level cache this CPU reports (sysfs), at least 512 MiB
// and at most 1 GiB (a guest may report the whole host's cache; a read probe needs "far
// past it", not all of the machine's memory).
size_t default_read_probe_bytes();

// Runs every read variant this CPU supports on `threads` threads (at least 1).
ReadProbeResult probe_read_bandwidth(int threads, const ReadProbeOptions& o = {});

}  // namespace hearth::probe
