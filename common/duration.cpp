#include "common/duration.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace hearth {

namespace {

// Milliseconds per unit, for the units parse_duration knows.
std::optional<double> unit_ms(std::string_view unit) {
  if (unit == "ns") return 1e-6;
  if (unit == "us" || unit == "\u00b5s") return 1e-3;
  if (unit == "ms") return 1.0;
  if (unit == "s") return 1e3;
  if (unit == "m") return 60e3;
  if (unit == "h") return 3600e3;
  return std::nullopt;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) return std::nullopt;
  double total_ms = 0;
  bool bare = true;  // a number without a unit: seconds, and nothing may follow
  while (!text.empty()) {
    size_t n = 0;
    bool digits = false;
    while (n < text.size() && is_digit(text[n])) n++, digits = true;
    if (n < text.size() && text[n] == '.') {
      n++;
      while (n < text.size() && is_digit(text[n])) n++, digits = true;
    }
    if (!digits) return std::nullopt;
    const double value = std::strtod(std::string(text.substr(0, n)).c_str(), nullptr);
    text.remove_prefix(n);
    size_t u = 0;
    while (u < text.size() && !is_digit(text[u]) && text[u] != '.') u++;
    if (u == 0) {
      if (!bare || !text.empty()) return std::nullopt;
      total_ms += value * 1e3;
      break;
    }
    const std::optional<double> ms = unit_ms(text.substr(0, u));
    if (!ms) return std::nullopt;
    bare = false;
    total_ms += value * *ms;
    text.remove_prefix(u);
  }
  // Past about 290 million years: not a duration anyone means, and it would not fit.
  if (!std::isfinite(total_ms) || total_ms > 9e18) return std::nullopt;
  const auto ms = std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
  return negative ? -ms : ms;
}

}  // namespace hearth
