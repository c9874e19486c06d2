// Utf8Sanitizer: well-formed UTF-8 passes unchanged in any cut; ill-formed input gets one
// U+FFFD per maximal subpart (Unicode 15 section 3.9, the examples of table 3-8).
#include <catch2/catch.hpp>
#include <string>

#include "engine/sampling/utf8.h"

using hearth::sanitize_utf8;

namespace {
const std::string kR = "\xEF\xBF\xBD";
}

TEST_CASE("well-formed UTF-8 passes unchanged whatever the cuts", "[utf8]") {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z\xF4\x8F\xBF\xBF\xED\x9F\xBF";
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      hearth::Utf8Sanitizer s;
      std::string out;
      s.append(text.substr(0, cut1), &out);
      s.append(text.substr(cut1, cut2 - cut1), &out);
      s.append(text.substr(cut2), &out);
      REQUIRE(s.held_bytes() == 0);
      REQUIRE(out == text);
    }
  }
}

TEST_CASE("ill-formed sequences get one U+FFFD per maximal subpart", "[utf8]") {
  CHECK(sanitize_utf8("\x80") == kR);                             // stray continuation
  CHECK(sanitize_utf8("\xC0\xAF") == kR + kR);                    // overlong lead C0
  CHECK(sanitize_utf8("\xE0\x80\xAF") == kR + kR + kR);           // overlong 3-byte
  CHECK(sanitize_utf8("\xED\xA0\x80") == kR + kR + kR);           // surrogate
  CHECK(sanitize_utf8("\xF4\x90\x80\x80") == kR + kR + kR + kR);  // above U+10FFFF
  CHECK(sanitize_utf8("\xF5") == kR);
  CHECK(sanitize_utf8("\xE2\x82"
                      "A") == kR + "A");  // truncated, then ASCII
  CHECK(sanitize_utf8("\xF0\x9F\x98"
                      "\xC3\xA9") == kR + "\xC3\xA9");
  // Table 3-8's example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  CHECK(sanitize_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + kR + kR + kR + "b" + kR + "c" + kR + kR + "d");
}

TEST_CASE("an incomplete sequence is held, then completed or replaced at the end", "[utf8]") {
  hearth::Utf8Sanitizer s;
  std::string out;
  s.append("\xE2\x82", &out);
  CHECK(out.empty());
  CHECK(s.held_bytes() == 2);
  s.finish(&out);
  CHECK(out == kR);
  CHECK(s.held_bytes() == 0);
}
