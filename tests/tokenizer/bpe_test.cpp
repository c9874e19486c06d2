// Byte-level BPE (tokenizer.ggml.model = "gpt2") on small vocabularies written with our GGUF
// writer: merges by rank, pre-tokenizer rules, special tokens, BOS, exact bytes back, load
// errors, and arbitrary bytes (run under ASan in CI).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"
#include "engine/tokenizer/tokenizer.h"

using hearth::Tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// GPT-2's byte -> character table, written out independently of the tokenizer's: printable
// bytes are themselves, the others U+0100.. in byte order.
std::string byte_char(int b) {
  static std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int c = 0; c < 256; ++c) {
      bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      int cp = printable ? c : next++;
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      t[c] = s;
    }
    return t;
  }();
  return table[static_cast<size_t>(b)];
}

// 256 byte tokens (id = byte), then merges' results, then special tokens.
struct TinyBpe {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::string pre = "qwen2";
  std::string arch = "qwen2";
  int add_bos = -1;  // -1: no key

  TinyBpe() {
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b)), types.push_back(1);
    // Ranks: "l l" first, then "h e", "e l", ... Words are written with 'Ġ' for ' '.
    for (const char* m : {"l l", "h e", "e l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a a", "1 2",
                          "12 3", "Ġ 1", "b c", "x y", "xy z"}) {
      add_merge(m);
    }
    add_token("abc", 1);  // reachable by no merge: only Llama 3's ignore_merges yields it
    add_token("<|endoftext|>", 3);
    add_token("<|im_start|>", 3);
    add_token("<|im_end|>", 4);  // user-defined in this file; llama.cpp treats it as control
    add_token("<tool_call>", 4);
    add_token("[PAD1]", 5);
  }
  void add_merge(const std::string& m) {
    merges.push_back(m);
    std::string merged = m;
    merged.erase(merged.find(' '), 1);
    if (id(merged) < 0) add_token(merged, 1);
  }
  void add_token(const std::string& t, int type) {
    tokens.push_back(t);
    types.push_back(type);
  }
  int32_t id(const std::string& t) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == t) return static_cast<int32_t>(i);
    }
    return -1;
  }
  std::vector<uint8_t> gguf() const {
    hearth::gguf::Writer w;
    w.set_string("general.architecture", arch);
    w.set_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", merges);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id("<|endoftext|>")));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id("<|im_end|>")));
    if (add_bos >= 0) w.set_bool("tokenizer.ggml.add_bos_token", add_bos != 0);
    return w.serialize();
  }
};

struct Loaded {
  std::unique_ptr<hearth::gguf::File> file;
  hearth::Result<std::unique_ptr<Tokenizer>> tok = hearth::make_error("not loaded");
};

Loaded load(const TinyBpe& v) {
  Loaded l;
  static std::vector<std::vector<uint8_t>> keep;  // File::from_memory does not copy
  keep.push_back(v.gguf());
  auto f = hearth::gguf::File::from_memory(keep.back().data(), keep.back().size());
  REQUIRE(f.ok());
  l.file = std::move(*f);
  l.tok = Tokenizer::from_gguf(*l.file);
  return l;
}

const Tokenizer& must(const Loaded& l) {
  INFO((l.tok.ok() ? std::string() : l.tok.error().message));
  REQUIRE(l.tok.ok());
  return **l.tok;
}

// llama.cpp's reading of bytes as text (unicode_cpts_from_utf8), written out from what it
// does (tests/fixtures/bpe_tokenizer.json): a lead byte with the continuation bytes it
// announces is one code point, surrogates included, unless overlong or above U+10FFFF; any
// other byte is U+FFFD. The result is those code points' UTF-8.
std::string llama_cpp_reading(const std::string& in) {
  std::string out;
  auto put = [&](uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (size_t i = 0; i < in.size();) {
    const auto b = static_cast<uint8_t>(in[i]);
    const size_t need = b < 0x80 ? 0 : b < 0xC0 ? 9 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : b < 0xF8 ? 3 : 9;
    bool ok = need != 9 && i + need < in.size();
    for (size_t k = 1; ok && k <= need; ++k) ok = (static_cast<uint8_t>(in[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      put(0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = need == 0 ? b : b & (0x3F >> need);
    for (size_t k = 1; k <= need; ++k) cp = (cp << 6) | (in[i + k] & 0x3F);
    const uint32_t shortest[] = {0, 0x80, 0x800, 0x10000};  // smallest code point per length
    if (cp < shortest[need] || cp > 0x10FFFF) {
      put(0xFFFD);
      ++i;
      continue;
    }
    put(cp);
    i += need + 1;
  }
  return out;
}

Ids bytes_of(const std::string& s) {  // one byte token per byte (ids 0..255 are the bytes)
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

}  // namespace

TEST_CASE("byte-level BPE merges adjacent symbols by rank, the leftmost pair first") {
  TinyBpe v;
  Loaded l = load(v);
  const Tokenizer& tok = must(l);
  // h e l l o: "l l" (rank 0) before "h e" (1) before "e l" (2, now impossible), then
  // "he ll", "hell o": one token. Merging "e l" first would have left h el l o.
  CHECK(tok.encode("hello", false, false) == Ids{v.id("hello")});
  CHECK(tok.encode("hello world", false, false) == Ids{v.id("hello"), v.id("Ġworld")});
  // Equal ranks: the leftmost pair merges first.
  CHECK(tok.encode("aaa", false, false) == Ids{v.id("aa"), 'a'});
  CHECK(tok.encode("aaaaa", false, false) == Ids{v.id("aa"), v.id("aa"), 'a'});
  // Bytes with no merge stay byte tokens, whatever they are.
  CHECK(tok.encode("q\x01", false, false) == Ids{'q', 1});
  CHECK(tok.n_vocab() == static_cast<int32_t>(v.tokens.size()));
}

TEST_CASE("the pre-tokenizer decides what BPE may merge") {
  TinyBpe v;
  v.pre = "qwen2";  // digits one at a time; a space joins the following letters
  {
    Loaded l = load(v);
    const Tokenizer& tok = must(l);
    CHECK(tok.encode("123", false, false) == Ids{'1', '2', '3'});
    CHECK(tok.encode(" 123", false, false) == Ids{' ', '1', '2', '3'});
    // Contractions are their own words, in any letter case.
    CHECK(tok.encode("xyz'S", false, false) == Ids{v.id("xyz"), '\'', 'S'});
  }
  v.pre = "gpt-2";  // digit runs are one word, with their leading space
  {
    Loaded l = load(v);
    const Tokenizer& tok = must(l);
    CHECK(tok.encode("123", false, false) == Ids{v.id("123")});
    // "1 2" and "12 3" outrank "Ġ 1", so the space stays alone.
    CHECK(tok.encode(" 123", false, false) == Ids{' ', v.id("123")});
  }
  v.pre = "llama-bpe";  // digits in threes; a word that is a token skips the merges
  {
    Loaded l = load(v);
    const Tokenizer& tok = must(l);
    CHECK(tok.encode("1231", false, false) == Ids{v.id("123"), '1'});
    CHECK(tok.encode("abc", false, false) == Ids{v.id("abc")});
  }
  v.pre = "qwen2";
  {
    Loaded l = load(v);
    CHECK(must(l).encode("abc", false, false) == Ids{'a', v.id("bc")});  // merges only
  }
}

TEST_CASE("special tokens split out before BPE, control ones only when parsing specials") {
  TinyBpe v;
  Loaded l = load(v);
  const Tokenizer& tok = must(l);
  const int32_t start = v.id("<|im_start|>"), end = v.id("<|im_end|>"), call = v.id("<tool_call>");
  CHECK(tok.encode("<|im_start|>hello<|im_end|>", false, true) == Ids{start, v.id("hello"), end});
  // Typed by a user: the control token and <|im_end|> (control by llama.cpp's end-of-turn
  // rule although the file says user-defined) are text; a user-defined token still splits.
  Ids typed = tok.encode("<|im_start|><|im_end|><tool_call>", false, false);
  CHECK(typed.size() > 3);
  CHECK(typed.back() == call);
  CHECK(tok.decode(typed) == "<|im_start|><|im_end|><tool_call>");
  CHECK(tok.is_eog(end));
}

TEST_CASE("BOS follows tokenizer.ggml.add_bos_token, else the pre-tokenizer's default") {
  TinyBpe v;
  const int32_t bos = v.id("<|endoftext|>");
  {
    Loaded l = load(v);  // qwen2, no key: no BOS
    CHECK_FALSE(must(l).add_bos());
    CHECK(must(l).encode("hello", true, false) == Ids{v.id("hello")});
  }
  v.add_bos = 1;
  {
    Loaded l = load(v);
    CHECK(must(l).encode("hello", true, false) == Ids{bos, v.id("hello")});
  }
  v.add_bos = -1;
  v.pre = "llama-bpe";  // Llama 3 adds BOS when the file does not say
  {
    Loaded l = load(v);
    CHECK(must(l).encode("hello", true, false) == Ids{bos, v.id("hello")});
  }
}

TEST_CASE("BPE tokens give back their exact bytes") {
  TinyBpe v;
  Loaded l = load(v);
  const Tokenizer& tok = must(l);
  CHECK(tok.token_bytes(v.id("Ġworld")) == " world");
  CHECK(tok.token_bytes(' ') == " ");  // byte token ids 0..255 in this vocabulary
  CHECK(tok.token_bytes(0x0A) == "\n");
  CHECK(tok.token_bytes(0xC3) == "\xC3");  // half a UTF-8 character
  CHECK(tok.token_bytes(v.id("<|im_start|>")).empty());
  CHECK(tok.token_bytes(v.id("<tool_call>")) == "<tool_call>");
  CHECK(tok.token_bytes(v.id("[PAD1]")).empty());
  for (const char* s : {"h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\x98\x80\r\n\t 12.5", "  \n\n  ", "\xE4\xBD\xA0"}) {
    INFO(s);
    CHECK(tok.decode(tok.encode(s, false, false)) == s);
  }
}

TEST_CASE("text that is not UTF-8 is read as llama.cpp reads it: each bad byte is U+FFFD") {
  TinyBpe v;
  Loaded l = load(v);
  const Tokenizer& tok = must(l);
  const Ids fffd{0xEF, 0xBF, 0xBD};
  auto cat = [](std::initializer_list<Ids> parts) {
    Ids all;
    for (const Ids& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  CHECK(tok.encode("q\x80r", false, false) == cat({{'q'}, fffd, {'r'}}));
  CHECK(tok.encode("q\xC3", false, false) == cat({{'q'}, fffd}));  // truncated
  CHECK(tok.encode("\xE4\xBD!", false, false) == cat({fffd, fffd, {'!'}}));
  CHECK(tok.encode("A\xC0\x80", false, false) == cat({{'A'}, fffd, fffd}));  // overlong NUL
  CHECK(tok.encode("\xF4\x90\x80\x80", false, false) ==                      // above U+10FFFF
        cat({fffd, fffd, fffd, fffd}));
  CHECK(tok.encode("\xED\xA0\x80", false, false) == bytes_of("\xED\xA0\x80"));  // surrogate
}

TEST_CASE("arbitrary bytes never crash the BPE encoder and give valid ids") {
  std::mt19937 rng(12345);  // fixed seed: the same inputs every run
  for (const char* pre : {"qwen2", "smollm", "llama-bpe", "gpt-2", "default"}) {
    TinyBpe v;
    v.pre = pre;
    Loaded l = load(v);
    const Tokenizer& tok = must(l);
    INFO(pre);
    const std::string pieces[] = {"<|im_start|>", "<|im_end|>",   "<tool_call>",  " ",    "\n",   "'s",
                                  "12",           "\xF0\x9F\x98", "\xE4\xBD\xA0", "\r\n", "hello"};
    for (int iter = 0; iter < 400; ++iter) {
      std::string s;
      const size_t n = rng() % 64;
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 4 == 0)
          s += pieces[rng() % std::size(pieces)];
        else
          s += static_cast<char>(rng() & 0xFF);
      }
      for (bool special : {false, true}) {
        Ids ids = tok.encode(s, true, special);
        for (int32_t id : ids) REQUIRE((id >= 0 && id < tok.n_vocab()));
        // Without special tokens every byte comes back, as llama.cpp reads it.
        if (!special) REQUIRE(tok.decode(ids) == llama_cpp_reading(s));
      }
    }
    // Valid UTF-8 of random code points comes back byte for byte.
    for (int iter = 0; iter < 200; ++iter) {
      std::string s;
      for (size_t i = 0, n = rng() % 24; i < n; ++i) {
        uint32_t cp = rng() % 5 == 0 ? rng() % 0x80 : rng() % 0x10FFFF;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        if (cp < 0x80) {
          s += static_cast<char>(cp);
        } else if (cp < 0x800) {
          s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          s += static_cast<char>(0xE0 | (cp >> 12));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          s += static_cast<char>(0xF0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
        }
      }
      REQUIRE(tok.decode(tok.encode(s, false, false)) == s);
    }
  }
}

TEST_CASE("a bad pre-tokenizer or a malformed merges array is a clear error at load") {
  {
    TinyBpe v;
    v.pre = "qwen7";
    Loaded l = load(v);
    REQUIRE_FALSE(l.tok.ok());
    const std::string& m = l.tok.error().message;
    CHECK(m.find("'qwen7'") != std::string::npos);
    CHECK(m.find("qwen2") != std::string::npos);  // names what is supported
    CHECK(m.find("smollm") != std::string::npos);
    CHECK(m.find("llama-bpe") != std::string::npos);
  }
  {
    TinyBpe v;
    v.merges.back() = "xyz";  // the last entry cut before its space
    Loaded l = load(v);
    REQUIRE_FALSE(l.tok.ok());
    CHECK(l.tok.error().message.find("merge 16 'xyz'") != std::string::npos);
  }
  {
    TinyBpe v;
    v.merges.back() = "xy ";  // cut after its space
    Loaded l = load(v);
    REQUIRE_FALSE(l.tok.ok());
    CHECK(l.tok.error().message.find("merges") != std::string::npos);
  }
  {
    TinyBpe v;
    v.merges.push_back("hello Ġworld");  // "helloĠworld" is no token
    Loaded l = load(v);
    REQUIRE_FALSE(l.tok.ok());
    CHECK(l.tok.error().message.find("'hello\xC4\xA0world'") != std::string::npos);
  }
  {
    TinyBpe v;
    v.merges.insert(v.merges.begin(), "zz q");  // names a token the vocabulary lacks
    Loaded l = load(v);
    REQUIRE_FALSE(l.tok.ok());
    CHECK(l.tok.error().message.find("'zz'") != std::string::npos);
  }
  {
    TinyBpe v;
    v.merges.clear();
    hearth::gguf::Writer w;  // no merges key at all
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    auto bytes = w.serialize();
    auto f = hearth::gguf::File::from_memory(bytes.data(), bytes.size());
    REQUIRE(f.ok());
    auto t = Tokenizer::from_gguf(**f);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find("tokenizer.ggml.merges") != std::string::npos);
  }
}

TEST_CASE("a Qwen3 file's tokenizer (pre qwen2) reads <think> and </think> as tokens in and out") {
  // Qwen3's files carry Qwen2's pre-tokenizer and its reasoning tags as user-defined tokens.
  TinyBpe v;
  v.arch = "qwen3";
  v.add_token("<think>", 4);
  v.add_token("</think>", 4);
  Loaded l = load(v);
  const Tokenizer& tok = must(l);
  auto tmpl = hearth::chat_template_from_name("qwen3");
  REQUIRE(tmpl.ok());
  hearth::ChatOptions off;
  off.enable_thinking = false;
  auto segments = hearth::render_chat(*tmpl, {{"user", "hello"}}, true, {}, off);
  REQUIRE(segments.ok());
  const std::vector<int32_t> ids = tok.encode_segments(*segments);
  const int32_t open = v.id("<think>"), close = v.id("</think>");
  CHECK(std::count(ids.begin(), ids.end(), open) == 1);
  CHECK(std::count(ids.begin(), ids.end(), close) == 1);
  // In generated text they read as their text, for the reasoning splitter to find.
  CHECK(tok.token_bytes(open) == "<think>");
  CHECK(tok.decode({open, v.id("hello"), close}) == "<think>hello</think>");
}
