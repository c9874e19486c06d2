// The machine probes: positive figures, measured once and then read back from the cache
// folder (v3: figures of the older, slower read probe are never reused); --reprobe
// measures again. No figure is compared with anything (they depend on the machine and its
// load). The read probe runs on a small buffer here: its shape is tested in
// read_probe_test.cpp.
#include "common/probe/machine_probe.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace hearth::probe;
namespace fs = std::filesystem;

namespace {
const ReadProbeOptions kSmall{size_t{16} << 20, 1};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hearth-probe-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("the machine probes return positive figures, are cached, and --reprobe measures again") {
  const fs::path dir = fs::temp_directory_path() / ("hearth-probe-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const MachinePeaks first = machine_peaks(dir.string(), 2, false, kSmall);
  CHECK_FALSE(first.from_cache);
  CHECK(first.int8_gops > 0);
  CHECK(first.read_gb_s > 0);
  CHECK(first.threads == 2);
  CHECK_FALSE(first.read_variant.empty());
  CHECK(fs::exists(dir / "machine-peaks-v3.tsv"));

  const MachinePeaks again = machine_peaks(dir.string(), 2, false, kSmall);
  CHECK(again.from_cache);
  CHECK(again.int8_gops == Approx(first.int8_gops).epsilon(1e-5));
  CHECK(again.read_gb_s == Approx(first.read_gb_s).epsilon(1e-5));
  CHECK(again.cpu == first.cpu);
  CHECK(again.read_variant == first.read_variant);

  // Another thread count is another entry; the first stays.
  const MachinePeaks one = machine_peaks(dir.string(), 1, false, kSmall);
  CHECK_FALSE(one.from_cache);
  CHECK(machine_peaks(dir.string(), 2, false, kSmall).from_cache);

  const MachinePeaks redone = machine_peaks(dir.string(), 2, true, kSmall);
  CHECK_FALSE(redone.from_cache);
  CHECK(redone.int8_gops > 0);
  CHECK(machine_peaks(dir.string(), 1, false, kSmall).from_cache);
  fs::remove_all(dir);
}

TEST_CASE("a cache folder that cannot be written only skips the remembering") {
  const MachinePeaks p = machine_peaks("/proc/hearth-no-such-dir", 1, false, kSmall);
  CHECK(p.int8_gops > 0);
  CHECK(p.read_gb_s > 0);
  CHECK_FALSE(p.from_cache);
}

TEST_CASE("peaks in the v2 file are not reused, and a damaged v3 line is measured again") {
  const fs::path dir = fresh_dir("versions");
  const MachinePeaks here = machine_peaks("", 1, false, kSmall);  // this CPU's name, nothing written
  {
    std::ofstream v2(dir / "machine-peaks-v2.tsv");
    v2 << "1\t999\t0.5\t" << here.cpu << "\n";
    std::ofstream v3(dir / "machine-peaks-v3.tsv");
    v3 << "1\tnot-a-number\t0.5\tc++ sum\t" << here.cpu << "\n";  // damaged
    v3 << "3\t100\t7.5\tc++ sum\tsome other cpu\n";               // another machine's line
  }
  const MachinePeaks p = machine_peaks(dir.string(), 1, false, kSmall);
  CHECK_FALSE(p.from_cache);
  CHECK(p.int8_gops != 999);
  const MachinePeaks back = machine_peaks(dir.string(), 1, false, kSmall);
  CHECK(back.from_cache);
  CHECK(back.read_gb_s == Approx(p.read_gb_s).epsilon(1e-5));
  std::ifstream in(dir / "machine-peaks-v3.tsv");
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all.find("some other cpu") != std::string::npos);  // kept
  CHECK(all.find("not-a-number") == std::string::npos);    // dropped
  fs::remove_all(dir);
}
