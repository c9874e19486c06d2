// How an achieved rate is reported against one of this machine's measured peaks. A peak
// is a measurement (common/probe), so a lower bound of what the machine can do: an
// achieved figure above it is possible (another engine found a faster way to read; part
// of a model sat in a large last-level cache; the probe ran while other work loaded the
// machine). No report prints more than 100% of a peak; above it, the report says the peak
// is a lower bound and how to measure it again.
//
// The two wordings, exactly (numbers with `decimals` decimals):
//   "11.7 GB/s = 78% of this machine's memory read peak (15.0 GB/s)"
//   "11.7 GB/s, above this machine's measured memory read peak (10.7 GB/s): that peak is
//    only a lower bound (measure it again: hearth-run --bench --reprobe)"
#pragma once

#include <string>

namespace hearth::probe {

struct PeakShare {
  bool known = false;  // both figures positive and finite
  bool above = false;  // achieved > peak: the peak is a lower bound, no percentage
  int percent = 0;     // round(100 × achieved / peak), 0..100; meaningful when known && !above
};

PeakShare share_of_peak(double achieved, double peak);

// The report of `achieved` against `peak` (both in `unit`), in one of the wordings above;
// `what` names the peak ("memory read peak", "int8 peak"), `remeasure` says how to measure
// it again. Without a known share: just the achieved figure and its unit.
std::string against_peak(double achieved, double peak, const std::string& unit, const std::string& what,
                         const std::string& remeasure, int decimals = 1);

}  // namespace hearth::probe
