// Pre-tokenization for byte-level BPE: splits a raw fragment (no special tokens in it) into
// the words BPE merges within, with the split regexes llama.cpp uses for the file's
// tokenizer.ggml.pre, so the words — and therefore the ids — are llama.cpp's.
//
// Each regex is applied in turn to every piece the previous ones produced (the first to the
// whole fragment); a piece splits into its matches and the text between matches, each a new
// piece, and a regex never sees past its piece (a lookahead at a piece's end sees the end).
// Unicode classes (\p{L}, \p{N}, \s) come from PCRE2 in UTF + UCP mode; \s is Unicode's
// White_Space property, which is llama.cpp's whitespace set (PCRE2's own \s adds U+180E).
//
// Invalid UTF-8 is read as llama.cpp reads it (unicode_cpts_from_utf8, as of its build
// b11739, which made tests/fixtures/bpe_tokenizer.json): a lead byte and the continuation
// bytes it announces form one code point unless that is an overlong form or above U+10FFFF;
// surrogates pass. Any other byte — a stray continuation byte, a lead byte whose sequence is
// cut short, overlong or too large, F8..FF — becomes U+FFFD on its own. The words are the
// UTF-8 of those code points, so they differ from the input where it was not valid UTF-8.
//
// PCRE2 stays private to bpe_pretokenizer.cpp. Immutable after construction; split() may run
// on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth::tok {

struct PreTokenizerSpec {
  std::vector<std::string> regexes;  // applied in order, as described above
  bool ignore_merges = false;        // a word that is itself a vocabulary token skips BPE (llama3)
  bool add_bos = false;              // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
};

// tokenizer.ggml.pre -> its spec; an error naming the value and the supported ones. An empty
// name is llama.cpp's "default" (it warns about such files).
Result<PreTokenizerSpec> pre_tokenizer_spec(std::string_view pre);

class PreTokenizer {
 public:
  static Result<std::unique_ptr<PreTokenizer>> create(const std::vector<std::string>& regexes);
  ~PreTokenizer();

  // Normalizes `text` into `normalized` (UTF-8 of llama.cpp's code points, see above) and
  // returns the word boundaries in it: word i is normalized[ends[i-1], ends[i]).
  void split(std::string_view text, std::string& normalized, std::vector<size_t>& ends) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::tok
