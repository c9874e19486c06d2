// The read probe and the wording of figures against peaks. The probe's figures depend on
// the machine and its load, so only their shape is checked (positive, finite, the best one
// the largest, the same variants every run); the wording is checked exactly, and over a
// sweep of ratios for the one promise every report makes: never above 100%.
#include "common/probe/read_probe.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "common/probe/peak_report.h"

using namespace hearth::probe;

namespace {

// A small buffer: the shape of the result, not the machine's figure, is under test (the
// sanitizer build reads it several times slower).
constexpr size_t kTestBytes = size_t{16} << 20;

// Every "N%" or "N.M%" in a text, as numbers.
std::vector<double> percents(const std::string& s) {
  std::vector<double> out;
  for (size_t pct = s.find('%'); pct != std::string::npos; pct = s.find('%', pct + 1)) {
    size_t b = pct;
    while (b > 0 && (std::isdigit(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '.')) --b;
    if (b < pct) out.push_back(std::stod(s.substr(b, pct - b)));
  }
  return out;
}

}  // namespace

TEST_CASE("the read probe gives positive finite figures, the best the largest, the same variants each run") {
  const ReadProbeResult a = probe_read_bandwidth(2, {kTestBytes, 1});
  REQUIRE_FALSE(a.variants.empty());
  CHECK(a.threads == 2);
  CHECK(a.bytes >= kTestBytes);
  CHECK(std::isfinite(a.best_gb_s));
  CHECK(a.best_gb_s > 0);
  std::set<std::string> names;
  double largest = 0;
  for (const ReadVariantResult& v : a.variants) {
    INFO(v.name);
    CHECK_FALSE(v.name.empty());
    CHECK(std::isfinite(v.gb_s));
    CHECK(v.gb_s > 0);
    names.insert(v.name);
    largest = std::max(largest, v.gb_s);
  }
  CHECK(names.size() == a.variants.size());  // no variant twice
  CHECK(a.best_gb_s == largest);
  CHECK(names.count(a.best) == 1);
  CHECK(names.count("c++ sum") == 1);  // the portable loop runs everywhere

  const ReadProbeResult b = probe_read_bandwidth(1, {kTestBytes, 2});
  REQUIRE(b.variants.size() == a.variants.size());
  for (size_t i = 0; i < a.variants.size(); ++i) CHECK(b.variants[i].name == a.variants[i].name);
  CHECK(b.threads == 1);
}

TEST_CASE("the read probe rounds a tiny buffer up and clamps nonsense thread counts and repetitions") {
  const ReadProbeResult r = probe_read_bandwidth(0, {1, 0});
  CHECK(r.threads == 1);
  CHECK(r.bytes >= size_t{2} << 20);  // whole 2 MiB pages
  CHECK(r.best_gb_s > 0);
  // More threads than 256-byte chunks would give some threads nothing: the buffer grows.
  const ReadProbeResult many = probe_read_bandwidth(64, {1, 1});
  CHECK(many.best_gb_s > 0);
}

TEST_CASE("the default read buffer is far past the caches and bounded") {
  const size_t b = default_read_probe_bytes();
  CHECK(b >= size_t{512} << 20);
  CHECK(b <= size_t{1} << 30);
}

TEST_CASE("a figure at or below its peak reads as a share of it") {
  CHECK(against_peak(7.5, 15.0, "GB/s", "memory read peak", "x") ==
        "7.5 GB/s = 50% of this machine's memory read peak (15.0 GB/s)");
  CHECK(against_peak(15.0, 15.0, "GB/s", "memory read peak", "x", 2) ==
        "15.00 GB/s = 100% of this machine's memory read peak (15.00 GB/s)");
  CHECK(against_peak(120, 200, "GOP/s", "int8 peak", "x") ==
        "120.0 GOP/s = 60% of this machine's int8 peak (200.0 GOP/s)");
}

TEST_CASE("a figure above its peak says the peak is a lower bound and never prints a percentage") {
  const std::string s = against_peak(11.7, 10.7, "GB/s", "memory read peak", "hearth-run --bench --reprobe");
  CHECK(s ==
        "11.7 GB/s, above this machine's measured memory read peak (10.7 GB/s): that peak is only a lower bound "
        "(measure it again: hearth-run --bench --reprobe)");
  CHECK(percents(s).empty());
  CHECK(percents("a 109% and 7.5% b") == std::vector<double>{109, 7.5});  // the helper finds them
  const PeakShare share = share_of_peak(11.7, 10.7);
  CHECK(share.known);
  CHECK(share.above);
  // Just above: no rounding to "100%" either.
  CHECK(share_of_peak(10.7 * (1 + 1e-12), 10.7).above);
}

TEST_CASE("no ratio of achieved to peak prints more than 100%") {
  for (double ratio = 0.001; ratio < 3.0; ratio *= 1.01) {
    for (double peak : {0.37, 10.7, 15.0, 1234.5}) {
      const std::string s = against_peak(ratio * peak, peak, "GB/s", "memory read peak", "again", 1);
      INFO(s);
      for (double p : percents(s)) CHECK(p <= 100);
      CHECK((s.find("lower bound") != std::string::npos) == (ratio * peak > peak));
    }
  }
  CHECK(share_of_peak(0.9996, 1.0).percent == 100);
  CHECK_FALSE(share_of_peak(0.9996, 1.0).above);
}

TEST_CASE("without a usable peak only the achieved figure is printed") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK(against_peak(5, 0, "GB/s", "memory read peak", "x") == "5.0 GB/s");
  CHECK(against_peak(5, -1, "GB/s", "memory read peak", "x") == "5.0 GB/s");
  CHECK(against_peak(5, nan, "GB/s", "memory read peak", "x") == "5.0 GB/s");
  CHECK(against_peak(5, inf, "GB/s", "memory read peak", "x") == "5.0 GB/s");
  CHECK_FALSE(share_of_peak(0, 10).known);
  CHECK_FALSE(share_of_peak(nan, 10).known);
}
