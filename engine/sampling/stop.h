// StopMatcher: the text side of the end of generation. Fed the decoded bytes of each token, it
// returns the text that is safe to show now and says when generation must stop.
//
// Held back until more bytes decide: (a) an incomplete UTF-8 sequence at the end, (b) the
// longest suffix that is a prefix of some stop string. When a stop string is complete, the
// text before it is emitted, stopped is set, and the stop string and anything after it are
// dropped. Output is always valid UTF-8 (ill-formed bytes become U+FFFD, see utf8.h).
//
// Example, stop strings {"</s>"}, tokens "Hi <", "/", "s>!":
//   feed("Hi <") -> "Hi "      ("<" might start "</s>")
//   feed("/")    -> ""         ("</" still might)
//   feed("s>!")  -> "", stopped ("</s>" complete; "!" dropped)
// With tokens "a<", "b" instead: "a", then "<b" (the false prefix is released).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling/utf8.h"

namespace hearth {

class StopMatcher {
 public:
  // Empty stop strings and ones that are not valid UTF-8 (they could never match the
  // sanitized text) are ignored. eog_tokens: end-of-generation token ids
  // (from the vocabulary) for feed_token.
  explicit StopMatcher(std::vector<std::string> stop_strings, std::vector<int32_t> eog_tokens = {});

  struct Step {
    std::string text;      // valid UTF-8, may be empty
    bool stopped = false;  // generation must end; later feeds return {"", true}
  };

  Step feed(std::string_view token_bytes);

  // feed() for a sampled token: an end-of-generation token stops without emitting its own
  // bytes and releases the held text as flush() does.
  Step feed_token(int32_t token, std::string_view token_bytes);

  // End of generation (length limit, EOG): releases the held text; an incomplete UTF-8
  // sequence at the very end becomes U+FFFD. Returns "" once stopped.
  std::string flush();

  bool is_eog(int32_t token) const;
  bool stopped() const { return stopped_; }
  // The stop string that ended generation; "" while going on and after an end-of-generation
  // token. When two complete at once the one that starts first wins, then the shorter (it
  // was complete first).
  const std::string& matched() const { return matched_; }

 private:
  // Emits pending_ up to a complete stop string, or up to the part that may start one.
  Step scan();
  // Bytes at the end of pending_ that are a proper prefix of some stop string.
  size_t held_suffix_length() const;

  std::vector<std::string> stops_;
  std::vector<int32_t> eog_tokens_;  // sorted
  Utf8Sanitizer utf8_;
  std::string pending_;  // valid UTF-8 decoded but not emitted yet
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace hearth
