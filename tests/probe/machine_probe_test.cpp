// The machine probes: positive figures, measured once and then read back from the cache
// folder; --reprobe measures again. No figure is compared with anything (they depend on
// the machine and its load).
#include "common/probe/machine_probe.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace hearth::probe;
namespace fs = std::filesystem;

TEST_CASE("the machine probes return positive figures, are cached, and --reprobe measures again") {
  const fs::path dir = fs::temp_directory_path() / ("hearth-probe-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const MachinePeaks first = machine_peaks(dir.string(), 2, false);
  CHECK_FALSE(first.from_cache);
  CHECK(first.int8_gops > 0);
  CHECK(first.read_gb_s > 0);
  CHECK(first.threads == 2);
  CHECK(fs::exists(dir / "machine-peaks-v2.tsv"));

  const MachinePeaks again = machine_peaks(dir.string(), 2, false);
  CHECK(again.from_cache);
  CHECK(again.int8_gops == Approx(first.int8_gops).epsilon(1e-5));
  CHECK(again.read_gb_s == Approx(first.read_gb_s).epsilon(1e-5));
  CHECK(again.cpu == first.cpu);

  // Another thread count is another entry; the first stays.
  const MachinePeaks one = machine_peaks(dir.string(), 1, false);
  CHECK_FALSE(one.from_cache);
  CHECK(machine_peaks(dir.string(), 2, false).from_cache);

  const MachinePeaks redone = machine_peaks(dir.string(), 2, true);
  CHECK_FALSE(redone.from_cache);
  CHECK(redone.int8_gops > 0);
  CHECK(machine_peaks(dir.string(), 1, false).from_cache);
  fs::remove_all(dir);
}

TEST_CASE("a cache folder that cannot be written only skips the remembering") {
  const MachinePeaks p = machine_peaks("/proc/hearth-no-such-dir", 1, false);
  CHECK(p.int8_gops > 0);
  CHECK(p.read_gb_s > 0);
  CHECK_FALSE(p.from_cache);
}
