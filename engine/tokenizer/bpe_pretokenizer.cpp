#include "engine/tokenizer/bpe_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>

namespace hearth::tok {
namespace {

// The split regexes, as llama.cpp's llama-vocab.cpp states them for each pre-tokenizer type
// (facts, not code): contractions are case-insensitive there only for ASCII letters, hence
// '[sS] rather than (?i:'s). GPT-2's regex is written here with its final |\s+, which
// llama.cpp's string drops but its hand-written matcher for that string implements.
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kContractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
// Llama 3 / Qwen 2 body, around the digit rule: \p{N}{1,3} (Llama 3) or \p{N} (Qwen 2).
constexpr const char* kLettersFirst = "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|";
constexpr const char* kAfterDigits = "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string llama3_like(const char* digits) {
  return std::string(kContractions) + kLettersFirst + digits + kAfterDigits;
}

struct Family {
  std::array<const char*, 8> names;  // tokenizer.ggml.pre values, nullptr-terminated
  int kind;
};
enum Kind { kDefault, kGpt2Kind, kQwen2, kSmollm, kLlama3 };
// Which tokenizer.ggml.pre values take which regexes (llama.cpp maps the same names).
constexpr Family kFamilies[] = {
    {{"default"}, kDefault},
    {{"gpt-2", "phi-2", "mpt", "olmo"}, kGpt2Kind},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, kQwen2},
    {{"smollm", "starcoder", "refact", "codeshell", "command-r"}, kSmollm},
    {{"llama-bpe", "llama3", "llama-v3"}, kLlama3},
};

// \s and \S as Unicode's White_Space (llama.cpp's whitespace table). Other escapes are kept.
std::string with_white_space_property(const std::string& re) {
  std::string out;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\' && i + 1 < re.size()) {
      char c = re[++i];
      if (c == 's')
        out += "\\p{White_Space}";
      else if (c == 'S')
        out += "\\P{White_Space}";
      else
        out += '\\', out += c;
      continue;
    }
    out += re[i];
  }
  return out;
}

void put_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

constexpr uint32_t kReplacement = 0xFFFD;

// llama.cpp's lenient UTF-8 reading (see the header). Appends the code points' UTF-8 to
// `normalized`; `subject` gets the same bytes except that surrogates, which PCRE2 refuses,
// become U+FFFD (also 3 bytes, and like a surrogate neither letter, number nor space).
// Returns false when subject == normalized.
bool normalize(std::string_view text, std::string& normalized, std::string& subject) {
  bool differs = false;
  size_t i = 0;
  const size_t n = text.size();
  auto cont = [&](size_t k) { return k < n && (static_cast<uint8_t>(text[k]) & 0xC0) == 0x80; };
  while (i < n) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      normalized += static_cast<char>(b);
      if (differs) subject += static_cast<char>(b);
      ++i;
      continue;
    }
    uint32_t cp = kReplacement;
    size_t len = 1;
    if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      cp = ((b & 0x1Fu) << 6) | (text[i + 1] & 0x3F), len = 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      cp = ((b & 0x0Fu) << 12) | ((text[i + 1] & 0x3Fu) << 6) | (text[i + 2] & 0x3F), len = 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      cp = ((b & 0x07u) << 18) | ((text[i + 1] & 0x3Fu) << 12) | ((text[i + 2] & 0x3Fu) << 6) | (text[i + 3] & 0x3F);
      len = 4;
    }
    // An overlong form or a code point above U+10FFFF: only the lead byte is U+FFFD.
    static constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (len > 1 && (cp < kMinOfLength[len] || cp > 0x10FFFF)) cp = kReplacement, len = 1;
    i += len;
    const size_t at = normalized.size();
    put_utf8(cp, normalized);
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      if (!differs) subject.assign(normalized, 0, at);
      differs = true;
      put_utf8(kReplacement, subject);
    } else if (differs) {
      subject.append(normalized, at, std::string::npos);
    }
  }
  return differs;
}

}  // namespace

Result<PreTokenizerSpec> pre_tokenizer_spec(std::string_view pre) {
  if (pre.empty()) pre = "default";
  int kind = -1;
  std::string supported;
  for (const Family& fam : kFamilies) {
    for (const char* name : fam.names) {
      if (!name) break;
      if (pre == name) kind = fam.kind;
      supported += supported.empty() ? "" : ", ";
      supported += name;
    }
  }
  PreTokenizerSpec spec;
  switch (kind) {
    case kDefault:  // llama.cpp's fallback for BPE files without a known pre-tokenizer
      spec.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
      break;
    case kGpt2Kind:
      spec.regexes = {kGpt2};
      break;
    case kQwen2:
      spec.regexes = {llama3_like("\\p{N}")};
      break;
    case kSmollm:
      spec.regexes = {"\\p{N}", kGpt2};
      break;
    case kLlama3:
      spec.regexes = {llama3_like("\\p{N}{1,3}")};
      spec.ignore_merges = true;
      spec.add_bos = true;
      break;
    default:
      return make_error("tokenizer: unsupported tokenizer.ggml.pre '" + std::string(pre) +
                        "' (hearth supports: " + supported + ")");
  }
  return spec;
}

struct PreTokenizer::Impl {
  std::vector<pcre2_code*> codes;
  ~Impl() {
    for (pcre2_code* c : codes) pcre2_code_free(c);
  }
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(const std::vector<std::string>& regexes) {
  auto impl = std::make_unique<Impl>();
  for (const std::string& re : regexes) {
    const std::string pattern = with_white_space_property(re);
    int err = 0;
    PCRE2_SIZE err_at = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_at, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return make_error("tokenizer: regex '" + re + "' does not compile at " + std::to_string(err_at) + ": " +
                        reinterpret_cast<const char*>(msg));
    }
    impl->codes.push_back(code);
    // JIT is an optimization only: where it is unavailable the interpreter matches the same.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(impl)));
}

void PreTokenizer::split(std::string_view text, std::string& normalized, std::vector<size_t>& ends) const {
  normalized.clear();
  ends.clear();
  std::string subject_copy;
  const bool differs = normalize(text, normalized, subject_copy);
  const std::string& subject = differs ? subject_copy : normalized;
  if (subject.empty()) return;

  ends.push_back(subject.size());
  std::vector<size_t> next;
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  for (pcre2_code* code : impl_->codes) {
    next.clear();
    size_t piece_start = 0;
    for (size_t piece_end : ends) {
      const auto* p = reinterpret_cast<PCRE2_SPTR>(subject.data() + piece_start);
      const size_t len = piece_end - piece_start;
      size_t pos = 0;   // where the next match may start, relative to the piece
      size_t done = 0;  // end of what is already emitted
      while (pos < len) {
        int rc = md ? pcre2_match(code, p, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr) : PCRE2_ERROR_NOMEMORY;
        if (rc < 0) break;  // no more matches (or a matcher limit): the rest stays one piece
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m1 <= m0) {  // none of our regexes matches empty; step one code point if one did
          pos = m0 + 1;
          while (pos < len && (subject[piece_start + pos] & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (m0 > done) next.push_back(piece_start + m0);
        next.push_back(piece_start + m1);
        done = pos = m1;
      }
      if (done < len) next.push_back(piece_end);
      piece_start = piece_end;
    }
    ends.swap(next);
  }
  if (md) pcre2_match_data_free(md);
}

}  // namespace hearth::tok
