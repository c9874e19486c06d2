// Splits text at special-token strings before sentencepiece sees it, the way llama.cpp's
// tokenizer_st_partition does, so our token ids match llama.cpp's:
//  - special tokens are the vocabulary's control, unknown and user-defined tokens;
//  - they are tried longest text first; each one splits every remaining raw fragment at all of
//    its (non-overlapping, left to right) occurrences;
//  - user-defined tokens (Gemma: runs of '\n', ' ', '\t', HTML tags) split everywhere; control
//    and unknown tokens only where the text is allowed to hold them (parse_special, or the
//    markup parts of a rendered chat).
// Internal to engine/tokenizer. Immutable after construction; safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hearth::tok {

struct Fragment {
  size_t offset;  // bytes into the text
  size_t length;  // bytes
  int32_t token;  // the special token, or -1 for raw text to encode
};

class SpecialSplitter {
 public:
  struct Special {
    int32_t id;
    std::string text;
    bool control;  // control/unknown: needs permission; false: user-defined, always split
  };
  explicit SpecialSplitter(std::vector<Special> specials);

  // `markup`: empty = control tokens allowed everywhere iff parse_special; otherwise one flag
  // per byte of `text`, and a control token matches only where all its bytes are flagged.
  std::vector<Fragment> split(std::string_view text, bool parse_special, const std::vector<uint8_t>& markup = {}) const;

 private:
  std::vector<Special> specials_;                         // longest text first, then lowest id
  std::unordered_map<std::string_view, size_t> by_text_;  // text -> index into specials_
  std::vector<size_t> lengths_;                           // distinct text lengths, bytes
  bool first_byte_[256] = {};                             // some special token starts with this byte
};

}  // namespace hearth::tok
