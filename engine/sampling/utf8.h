// Utf8Sanitizer: turns a byte stream cut at arbitrary points (token boundaries) into valid
// UTF-8, holding back a sequence that is not complete yet.
#pragma once

#include <string>
#include <string_view>

namespace hearth {

// U+FFFD REPLACEMENT CHARACTER, UTF-8 encoded.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Ill-formed input is replaced by U+FFFD, one per maximal subpart (Unicode 15, section 3.9,
// "U+FFFD Substitution of Maximal Subparts"; what WHATWG's decoder and Python do): a stray
// continuation byte, C0/C1/F5..FF, an overlong form, a surrogate, a code point above
// U+10FFFF, or a sequence cut short by a byte that cannot continue it.
class Utf8Sanitizer {
 public:
  // Appends to *out the valid UTF-8 for everything fed so far, except a trailing sequence that
  // is valid so far but incomplete (at most 3 bytes), which is held for the next call.
  void append(std::string_view bytes, std::string* out);
  // End of input: a held incomplete sequence becomes one U+FFFD.
  void finish(std::string* out);
  size_t held_bytes() const { return held_.size(); }

 private:
  std::string held_;
};

// Whole-string convenience: sanitize then finish.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace hearth
