#include "engine/sampling/utf8.h"

#include <cstdint>

namespace hearth {
namespace {

// Well-formed UTF-8 (Unicode 15, table 3-7): for a lead byte, the sequence length and the
// range of the second byte; later bytes are always 80..BF. length 0: not a lead byte.
struct LeadInfo {
  int length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  return {0, 0, 0};
}

}  // namespace

void Utf8Sanitizer::append(std::string_view bytes, std::string* out) {
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(bytes);
  const size_t n = buf.size();
  size_t i = 0;
  while (i < n) {
    const auto b = static_cast<uint8_t>(buf[i]);
    const LeadInfo info = lead_info(b);
    if (info.length == 1) {
      out->push_back(buf[i++]);
      continue;
    }
    if (info.length == 0) {
      out->append(kReplacementChar);
      ++i;
      continue;
    }
    size_t j = 1;
    bool bad = false;
    for (; j < static_cast<size_t>(info.length); ++j) {
      if (i + j >= n) {
        held_.assign(buf, i, n - i);  // valid so far, incomplete
        return;
      }
      const auto c = static_cast<uint8_t>(buf[i + j]);
      const uint8_t lo = j == 1 ? info.second_lo : 0x80;
      const uint8_t hi = j == 1 ? info.second_hi : 0xBF;
      if (c < lo || c > hi) {
        bad = true;
        break;
      }
    }
    if (bad) {
      out->append(kReplacementChar);  // the maximal subpart buf[i, i + j)
      i += j;
    } else {
      out->append(buf, i, j);
      i += j;
    }
  }
}

void Utf8Sanitizer::finish(std::string* out) {
  if (!held_.empty()) out->append(kReplacementChar);
  held_.clear();
}

std::string sanitize_utf8(std::string_view bytes) {
  Utf8Sanitizer s;
  std::string out;
  s.append(bytes, &out);
  s.finish(&out);
  return out;
}

}  // namespace hearth
