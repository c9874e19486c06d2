#include "common/probe/peak_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hearth::probe {
namespace {

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals < 0 ? 0 : decimals > 6 ? 6 : decimals, x);
  return buf;
}

}  // namespace

PeakShare share_of_peak(double achieved, double peak) {
  PeakShare s;
  s.known = std::isfinite(achieved) && std::isfinite(peak) && achieved > 0 && peak > 0;
  if (!s.known) return s;
  s.above = achieved > peak;
  // Rounding cannot lift a figure at or below the peak past 100.
  s.percent = s.above ? 0 : static_cast<int>(std::lround(std::min(100.0, 100.0 * achieved / peak)));
  return s;
}

std::string against_peak(double achieved, double peak, const std::string& unit, const std::string& what,
                         const std::string& remeasure, int decimals) {
  const PeakShare s = share_of_peak(achieved, peak);
  const std::string a = fixed(achieved, decimals) + " " + unit;
  if (!s.known) return a;
  const std::string p = fixed(peak, decimals) + " " + unit;
  if (!s.above) return a + " = " + std::to_string(s.percent) + "% of this machine's " + what + " (" + p + ")";
  return a + ", above this machine's measured " + what + " (" + p +
         "): that peak is only a lower bound (measure it again: " + remeasure + ")";
}

}  // namespace hearth::probe
