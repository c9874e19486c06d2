// Tokenizer specification. Ids for the default model were produced by llama.cpp
// (llama-cpp-python 0.3.36, Llama(vocab_only=True).tokenize) on
// gemma-3-270m-q4_k_m.gguf; hearth must reproduce them exactly.
#include "engine/tokenizer/tokenizer.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"
#include "engine/tokenizer/chat_template.h"
#include "test_util.h"

using hearth::ChatMessage;
using hearth::Tokenizer;
using Ids = std::vector<int32_t>;

namespace {

// Loads the default model's tokenizer once; nullptr when the model is not installed.
const Tokenizer* model_tokenizer() {
  static std::unique_ptr<hearth::gguf::File> file;
  static std::unique_ptr<Tokenizer> tok;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::string path = hearth::test::gemma_model_path();
    if (path.empty()) return nullptr;
    auto f = hearth::gguf::File::open(path);
    REQUIRE(f.ok());
    file = std::move(*f);
    auto t = Tokenizer::from_gguf(*file);
    INFO((t.ok() ? std::string() : t.error().message));
    REQUIRE(t.ok());
    tok = std::move(*t);
  }
  return tok.get();
}

#define NEED_MODEL(tok)                                \
  const Tokenizer* tok = model_tokenizer();            \
  if (!tok) {                                          \
    WARN("default model not installed; test skipped"); \
    return;                                            \
  }

// A tiny SentencePiece vocabulary: 7 specials, 256 byte tokens, a few merges.
struct TinyVocab {
  std::vector<std::string> tokens{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n"};
  std::vector<float> scores{0, 0, 0, 0, 0, 0, 0};
  std::vector<int32_t> types{3, 3, 3, 2, 3, 3, 4};
  TinyVocab() {
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
      scores.push_back(0);
      types.push_back(6);
    }
    // Normal pieces; higher score merges first.
    for (auto [p, s] : {std::pair{"\xE2\x96\x81", -1.0f},
                        {"a", -2.0f},
                        {"b", -3.0f},
                        {"ab", -4.0f},
                        {"\xE2\x96\x81"
                         "ab",
                         -5.0f},
                        {"c", -6.0f}}) {
      tokens.push_back(p);
      scores.push_back(s);
      types.push_back(1);
    }
  }
  int32_t id(std::string_view p) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == p) return static_cast<int32_t>(i);
    }
    return -1;
  }
  std::vector<uint8_t> gguf(std::string model = "llama", bool space_prefix_key = true) const {
    hearth::gguf::Writer w;
    w.set_string("general.architecture", "gemma3");
    w.set_string("tokenizer.ggml.model", model);
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_u32("tokenizer.ggml.unknown_token_id", 3);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    if (space_prefix_key) w.set_bool("tokenizer.ggml.add_space_prefix", false);  // as Gemma files say
    return w.serialize();
  }
};

hearth::Result<std::unique_ptr<Tokenizer>> load(const std::vector<uint8_t>& bytes,
                                                std::unique_ptr<hearth::gguf::File>& keep) {
  auto f = hearth::gguf::File::from_memory(bytes.data(), bytes.size());
  REQUIRE(f.ok());
  keep = std::move(*f);
  return Tokenizer::from_gguf(*keep);
}

}  // namespace

TEST_CASE("a vocabulary built from GGUF metadata merges by score and falls back to bytes") {
  TinyVocab v;
  auto bytes = v.gguf();
  std::unique_ptr<hearth::gguf::File> file;
  auto t = load(bytes, file);
  INFO((t.ok() ? std::string() : t.error().message));
  REQUIRE(t.ok());
  const Tokenizer& tok = **t;
  CHECK(tok.n_vocab() == static_cast<int32_t>(v.tokens.size()));
  CHECK(tok.encode("ab ab", true, false) == Ids{2, v.id("ab"),
                                                v.id("\xE2\x96\x81"
                                                     "ab")});
  // 'd' and 'é' are not in the vocabulary: their UTF-8 bytes come out as byte tokens.
  CHECK(tok.encode("d\xC3\xA9", false, false) == Ids{v.id("<0x64>"), v.id("<0xC3>"), v.id("<0xA9>")});
  CHECK(tok.decode(tok.encode("cab d\xC3\xA9\nab", true, false)) == "cab d\xC3\xA9\nab");
  CHECK(tok.encode("<start_of_turn>c", false, true) == Ids{4, v.id("c")});
  CHECK(tok.encode("<start_of_turn>", false, false).size() > 1);
  CHECK(tok.is_eog(1));
  CHECK(tok.is_eog(5));  // <end_of_turn> by its text
  CHECK_FALSE(tok.is_eog(2));
}

TEST_CASE("end of generation covers the ChatML and fill-in-the-middle controls llama.cpp stops at") {
  // Qwen2.5-Coder's controls: <|im_end|> (its eos), <|endoftext|>, and the FIM pad,
  // repository and file-separator tokens; <|im_start|> and <|fim_prefix|> do not end a turn.
  TinyVocab qwen;
  for (const char* t : {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>", "<|fim_pad|>", "<|repo_name|>",
                        "<|file_sep|>"}) {
    qwen.tokens.push_back(t);
    qwen.scores.push_back(0);
    qwen.types.push_back(3);
  }
  std::unique_ptr<hearth::gguf::File> file;
  auto t = load(qwen.gguf(), file);
  REQUIRE(t.ok());
  for (const char* eog : {"<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}) {
    INFO(eog);
    CHECK((*t)->is_eog(qwen.id(eog)));
  }
  CHECK_FALSE((*t)->is_eog(qwen.id("<|im_start|>")));
  CHECK_FALSE((*t)->is_eog(qwen.id("<|fim_prefix|>")));

  // SmolLM2's StarCoder-style vocabulary: <reponame> is the repository token; <file_sep> is
  // not one of the names llama.cpp looks for.
  TinyVocab smol;
  for (const char* t : {"<|im_end|>", "<reponame>", "<file_sep>"}) {
    smol.tokens.push_back(t);
    smol.scores.push_back(0);
    smol.types.push_back(3);
  }
  std::unique_ptr<hearth::gguf::File> file2;
  auto s = load(smol.gguf(), file2);
  REQUIRE(s.ok());
  CHECK((*s)->is_eog(smol.id("<|im_end|>")));
  CHECK((*s)->is_eog(smol.id("<reponame>")));
  CHECK_FALSE((*s)->is_eog(smol.id("<file_sep>")));
}

TEST_CASE("a GGUF tokenizer hearth does not know, or an inconsistent one, is an error") {
  TinyVocab v;
  std::unique_ptr<hearth::gguf::File> file;
  auto wpm = load(v.gguf("bert"), file);
  REQUIRE_FALSE(wpm.ok());
  CHECK(wpm.error().message.find("'bert'") != std::string::npos);

  v.scores.pop_back();
  auto short_scores = load(v.gguf(), file);
  REQUIRE_FALSE(short_scores.ok());
  CHECK(short_scores.error().message.find("scores") != std::string::npos);
}

TEST_CASE("the default model's tokenizer metadata") {
  NEED_MODEL(tok);
  CHECK(tok->n_vocab() == 262144);
  CHECK(tok->bos_id() == 2);
  CHECK(tok->eos_id() == 1);
  CHECK(tok->add_bos());
  CHECK(tok->piece(2) == "<bos>");
  CHECK(tok->find_token("<end_of_turn>") == 106);
  CHECK_FALSE(tok->find_token("no such piece").has_value());
  CHECK(tok->is_eog(1));
  CHECK(tok->is_eog(106));
  CHECK_FALSE(tok->is_eog(2));
  CHECK_FALSE(tok->is_eog(9259));
  CHECK(tok->is_control(105));
  CHECK_FALSE(tok->is_control(107));
}

TEST_CASE("ids equal llama.cpp's for the default model") {
  NEED_MODEL(tok);
  struct Case {
    const char* text;
    Ids ids;  // llama.cpp, add_special = true, parse_special = false
  };
  const Case cases[] = {
      {"Hello world", {2, 9259, 1902}},
      {"The quick brown fox jumps over the lazy dog.",
       {2, 818, 3823, 8864, 37423, 38167, 1024, 506, 31770, 4799, 236761}},
      {"def f(x):\n    return x + 1\n",
       {2, 2063, 517, 236769, 236781, 1473, 107, 140, 2060, 1123, 900, 236743, 236770, 107}},
      {"\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81",  // 你好，世界！
       {2, 144626, 236900, 12811, 237354}},
      {"emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89 and \xf0\x9f\xa7\x91\xe2\x80\x8d\xf0\x9f\x9a\x80",
       {2, 67906, 163543, 242061, 532, 236743, 247027, 237243, 242015}},
      {"a   b\t\t\n\n  c", {2, 236746, 139, 236763, 255969, 108, 138, 236755}},
      {" leading and trailing ", {2, 5830, 532, 45330, 236743}},
      {"\xea\x99\xae", {2, 472, 391, 412}},  // U+A66E, not in the vocabulary: 3 byte tokens
      {"<start_of_turn>user\nhi<end_of_turn>",
       {2, 236820, 3041, 236779, 1340, 236779, 887, 236813, 2364, 107, 2202, 236820, 643, 236779, 1340, 236779, 887,
        236813}},
      {"<b>bold</b> [multimodal]", {2, 200, 15640, 209, 236743, 5}},
      {"caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9", {2, 123125, 236859, 120362, 118515}},
      {"1234567890 3.14159",
       {2, 236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771, 236743, 236800, 236761,
        236770, 236812, 236770, 236810, 236819}},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(tok->encode(c.text, true, false) == c.ids);
  }
}

TEST_CASE("special tokens are single ids in markup and several tokens in user text") {
  NEED_MODEL(tok);
  CHECK(tok->encode("<start_of_turn>", false, true) == Ids{105});
  CHECK(tok->encode("<start_of_turn>user\nhi<end_of_turn>", true, true) == Ids{2, 105, 2364, 107, 2202, 106});
  Ids typed = tok->encode("<start_of_turn>", false, false);
  CHECK(typed == Ids{236820, 3041, 236779, 1340, 236779, 887, 236813});
  CHECK(tok->decode(typed) == "<start_of_turn>");
}

TEST_CASE("a rendered Gemma chat tokenizes as llama.cpp tokenizes the prompt") {
  NEED_MODEL(tok);
  std::vector<ChatMessage> msgs{{"system", "You are terse."},
                                {"user", "Hi there!"},
                                {"assistant", "Hello."},
                                {"user", "Say <start_of_turn> please"}};
  auto segs = hearth::render_chat(hearth::ChatFamily::Gemma, msgs, true);
  REQUIRE(segs.ok());
  // llama.cpp: the prompt up to "Say " with parse_special, the user's "<start_of_turn>
  // please" without, the rest with.
  Ids want{2,    105,    2364, 107,    3048, 659,    17514, 236761, 108, 10979, 993,  236888, 106,
           107,  105,    4368, 107,    9259, 236761, 106,   107,    105, 2364,  107,  37889,  655,
           3041, 236779, 1340, 236779, 887,  236813, 5091,  106,    107, 105,   4368, 107};
  CHECK(tok->encode_segments(*segs) == want);
}

TEST_CASE("decoding gives back the text for many scripts and whitespace runs") {
  NEED_MODEL(tok);
  const char* texts[] = {
      "Hello, world!",
      "int main() {\n\tif (x) {\n\t\treturn 1;\n\t}\n    return 0;\n}\n",
      "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c",
      "\xf0\x9f\x98\x80\xf0\x9f\xa6\x96\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
      "\xea\x99\xae \xf0\x9d\x94\x98",  // byte-fallback characters
      "a  b   c                                        d",
      "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend",
      "  mixed \t\n English, \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 and \xe6\x97\xa5\xe6\x9c\xac ",
      " ",
      "",
  };
  for (const char* t : texts) {
    INFO(t);
    CHECK(tok->decode(tok->encode(t, true, false)) == t);
  }
}

TEST_CASE("token_bytes gives what a streamed token shows") {
  NEED_MODEL(tok);
  CHECK(tok->token_bytes(1902) == " world");
  CHECK(tok->token_bytes(107) == "\n");
  CHECK(tok->token_bytes(472) == "\xEA");  // <0xEA>: part of a UTF-8 character
  CHECK(tok->token_bytes(105).empty());    // control
  CHECK(tok->token_bytes(-1).empty());
  CHECK(tok->token_bytes(tok->n_vocab()).empty());
  CHECK(tok->decode({2, 105, 9259, 106}) == "Hello");
}

TEST_CASE("a vocabulary without add_space_prefix gets a space prefix, as llama.cpp reads it") {
  TinyVocab v;
  std::unique_ptr<hearth::gguf::File> keep;
  auto tok = load(v.gguf("llama", /*space_prefix_key=*/false), keep);
  REQUIRE(tok.ok());
  CHECK((*tok)->encode("ab", false, false) == std::vector<int32_t>{v.id("\xE2\x96\x81"
                                                                        "ab")});
}
