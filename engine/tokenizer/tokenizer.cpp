#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <unordered_set>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/special_split.h"
#include "engine/tokenizer/vocab_model.h"

namespace hearth {
namespace {

using tok::kTypeByte;
using tok::kTypeControl;
using tok::kTypeNormal;
using tok::kTypeUnknown;
using tok::kTypeUserDefined;

// Text of end-of-turn tokens llama.cpp treats as end of generation when present. llama.cpp
// also makes them control tokens when the file says otherwise, so they split out of text
// only with parse_special.
constexpr std::string_view kEogTexts[] = {"<end_of_turn>", "<|eot_id|>",    "<|eom_id|>", "<|im_end|>",
                                          "<|end|>",       "<|endoftext|>", "<EOT>",      "<|end_of_text|>"};
// The rest of llama.cpp's list (llama-vocab.cpp, as of llama-cpp-python 0.3.36), applied to
// byte-level BPE vocabularies only, so SentencePiece (Gemma) behaviour stays as it was. It
// matters: Qwen2.5 has a normal token "</s>" that llama.cpp makes control, so "</s>" in text
// parsed for special tokens is that one id there.
constexpr std::string_view kBpeEogTexts[] = {"<|return|>",
                                             "<|call|>",
                                             "<|flush|>",
                                             "<|calls|>",
                                             "</s>",
                                             "_<EOT>",
                                             "[EOT]",
                                             "[EOS]",
                                             "<end_of_utterance>",
                                             "<eos>",
                                             "<turn|>",
                                             "<|tool_response>",
                                             "<\xEF\xBD\x9C"
                                             "end\xE2\x96\x81of\xE2\x96\x81sentence"
                                             "\xEF\xBD\x9C>",
                                             "[e~["};

// Fill-in-the-middle controls llama.cpp also ends generation on: the padding, repository and
// file-separator tokens (a code model that writes one has left the answer). Each group: the
// metadata key, then the token texts that name it when the key is absent (Qwen2.5-Coder has
// <|fim_pad|>, <|repo_name|>, <|file_sep|>; SmolLM2 has <reponame>).
struct FimEog {
  const char* key;
  std::initializer_list<std::string_view> texts;
};
const FimEog kFimEog[] = {
    {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
};

// The end-of-turn texts llama.cpp applies to this vocabulary, with its two exceptions:
// "</s>" is a normal token where "<|tool_response>" or "<|plamo:eos|>" exist, and "<|end|>"
// is not end of turn where "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>") exist.
std::vector<std::string_view> eog_texts(const tok::Vocab& v, bool bpe) {
  std::vector<std::string_view> texts(std::begin(kEogTexts), std::end(kEogTexts));
  if (!bpe) return texts;
  texts.insert(texts.end(), std::begin(kBpeEogTexts), std::end(kBpeEogTexts));
  auto has = [&](std::string_view t) { return v.find(t) >= 0; };
  auto drop = [&](std::string_view t) { std::erase(texts, t); };
  if (has("<|tool_response>") || has("<|plamo:eos|>")) drop("</s>");
  if ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))) drop("<|end|>");
  return texts;
}

}  // namespace

struct Tokenizer::Impl {
  tok::Vocab vocab;
  std::unique_ptr<tok::VocabModel> model;  // refers to `vocab`
  std::unordered_set<int32_t> eog;
  std::unique_ptr<tok::SpecialSplitter> splitter;
  bool add_bos = true, add_eos = false;

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              const std::vector<uint8_t>& markup) const {
    std::vector<int32_t> out;
    if (add_special && add_bos && vocab.bos >= 0) out.push_back(vocab.bos);
    bool after_special = true;  // the start counts as following a special token
    for (const tok::Fragment& f : splitter->split(text, parse_special, markup)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
      } else {
        model->encode_raw(text.substr(f.offset, f.length), after_special, out);
        after_special = false;
      }
    }
    if (add_special && add_eos && vocab.eos >= 0) out.push_back(vocab.eos);
    return out;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

namespace {

// tokenizer.ggml.token_type, one type per token (all normal when the key is absent).
Result<std::vector<uint8_t>> read_token_types(const gguf::File& f, size_t n) {
  std::vector<uint8_t> types(n, kTypeNormal);
  if (!f.has("tokenizer.ggml.token_type")) return types;
  auto t = f.get_int_array("tokenizer.ggml.token_type");
  if (!t.ok()) return make_error("tokenizer: " + t.error().message);
  if (t->size() != n)
    return make_error("tokenizer: tokenizer.ggml.token_type has " + std::to_string(t->size()) + " entries, tokens " +
                      std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = (*t)[i];
    if (v < kTypeNormal || v > kTypeByte)
      return make_error("tokenizer: token " + std::to_string(i) + " has unknown type " + std::to_string(v));
    types[i] = static_cast<uint8_t>(v);
  }
  return types;
}

// A token id from the metadata (-1 when the key is absent); an id outside the vocabulary
// of n tokens is an error.
Status read_token_id(const gguf::File& f, const char* key, size_t n, int32_t& out) {
  out = -1;
  if (!f.has(key)) return {};
  auto v = f.get_int(key);
  if (!v.ok()) return make_error("tokenizer: " + v.error().message);
  if (*v < 0 || *v >= static_cast<int64_t>(n))
    return make_error(std::string("tokenizer: ") + key + " = " + std::to_string(*v) + " is outside the vocabulary of " +
                      std::to_string(n));
  out = static_cast<int32_t>(*v);
  return {};
}

// The vocabulary: pieces, types, the lookup index and the special ids.
Status read_vocab(const gguf::File& f, const std::vector<std::string_view>& tokens, tok::Vocab& vocab) {
  const size_t n = tokens.size();
  Result<std::vector<uint8_t>> types = read_token_types(f, n);
  if (!types.ok()) return types.error();
  for (auto [key, out] : {std::pair{"tokenizer.ggml.bos_token_id", &vocab.bos},
                          {"tokenizer.ggml.eos_token_id", &vocab.eos},
                          {"tokenizer.ggml.unknown_token_id", &vocab.unk},
                          {"tokenizer.ggml.padding_token_id", &vocab.pad},
                          {"tokenizer.ggml.eot_token_id", &vocab.eot},
                          {"tokenizer.ggml.eom_token_id", &vocab.eom}}) {
    if (Status s = read_token_id(f, key, n, *out); !s.ok()) return s;
  }
  vocab.pieces.reserve(n);
  for (std::string_view t : tokens) vocab.pieces.emplace_back(t);
  vocab.types = std::move(*types);
  vocab.index.reserve(n);
  for (size_t i = 0; i < n; ++i) vocab.index[vocab.pieces[i]] = static_cast<int32_t>(i);
  return {};
}

// The tokens that end generation: eos, eot, eom, the end-of-turn texts the vocabulary has
// (eog_texts) and the fill-in-the-middle ones. Returns the ids found by their text, which
// are split out of text as control tokens whatever their type.
Result<std::unordered_set<int32_t>> collect_eog(const gguf::File& f, const tok::Vocab& vocab, bool byte_level,
                                                std::unordered_set<int32_t>& eog) {
  for (int32_t id : {vocab.eos, vocab.eot, vocab.eom})
    if (id >= 0) eog.insert(id);
  std::unordered_set<int32_t> by_text;
  for (std::string_view text : eog_texts(vocab, byte_level))
    if (int32_t id = vocab.find(text); id >= 0) eog.insert(id), by_text.insert(id);
  for (const FimEog& fim : kFimEog) {
    int32_t id = -1;
    if (Status s = read_token_id(f, fim.key, vocab.pieces.size(), id); !s.ok()) return s.error();
    for (std::string_view text : fim.texts) {
      if (id >= 0) break;
      id = vocab.find(text);
    }
    if (id >= 0) eog.insert(id);
  }
  return by_text;
}

// The tokens matched in text before the model's own encoding: control, unknown and
// user-defined tokens, and the end-of-generation tokens found by their text.
std::unique_ptr<tok::SpecialSplitter> make_splitter(const tok::Vocab& vocab,
                                                    const std::unordered_set<int32_t>& eog_by_text) {
  std::vector<tok::SpecialSplitter::Special> specials;
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    const int t = vocab.types[i];
    if (eog_by_text.count(id)) {
      specials.push_back({id, vocab.pieces[i], /*control=*/true});  // whatever its type
    } else if (t == kTypeControl || t == kTypeUnknown || t == kTypeUserDefined) {
      specials.push_back({id, vocab.pieces[i], t != kTypeUserDefined});
    }
  }
  return std::make_unique<tok::SpecialSplitter>(std::move(specials));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& f) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model.ok()) return make_error("tokenizer: " + model.error().message);
  if (*model != "llama" && *model != "gpt2") {
    return make_error("tokenizer: unsupported tokenizer.ggml.model '" + std::string(*model) +
                      "' (hearth supports 'llama', SentencePiece, and 'gpt2', byte-level BPE)");
  }
  const bool byte_level = *model == "gpt2";
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return make_error("tokenizer: " + tokens.error().message);
  const size_t n = tokens->size();
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("tokenizer: tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  }

  auto impl = std::make_unique<Impl>();
  if (Status s = read_vocab(f, *tokens, impl->vocab); !s.ok()) return s.error();
  auto vm = byte_level ? tok::make_bpe_model(f, impl->vocab) : tok::make_spm_model(f, impl->vocab);
  if (!vm.ok()) return vm.error();
  impl->model = std::move(*vm);

  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", impl->model->default_add_bos());
  auto add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  for (const auto* r : {&add_bos, &add_eos}) {
    if (!r->ok()) return make_error("tokenizer: " + r->error().message);
  }
  impl->add_bos = *add_bos;
  impl->add_eos = *add_eos;

  Result<std::unordered_set<int32_t>> eog_by_text = collect_eog(f, impl->vocab, byte_level, impl->eog);
  if (!eog_by_text.ok()) return eog_by_text.error();
  impl->splitter = make_splitter(impl->vocab, *eog_by_text);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return impl_->encode(text, add_bos, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode_segments(const std::vector<ChatSegment>& segments) const {
  std::string text;
  std::vector<uint8_t> markup;
  for (const ChatSegment& s : segments) {
    text += s.text;
    markup.insert(markup.end(), s.text.size(), s.markup ? 1 : 0);
  }
  if (text.empty()) return {};
  return impl_->encode(text, /*add_special=*/false, /*parse_special=*/false, markup);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const tok::Vocab& v = impl_->vocab;
  if (!v.valid(id)) return {};
  switch (v.types[static_cast<size_t>(id)]) {
    case kTypeNormal:
    case kTypeByte:
      return impl_->model->normal_bytes(id);
    case kTypeUserDefined:
      return v.pieces[static_cast<size_t>(id)];
    default:
      return {};
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string_view Tokenizer::piece(int32_t id) const {
  return impl_->vocab.valid(id) ? std::string_view(impl_->vocab.pieces[static_cast<size_t>(id)]) : std::string_view();
}

int32_t Tokenizer::n_vocab() const {
  return impl_->vocab.size();
}
int32_t Tokenizer::bos_id() const {
  return impl_->vocab.bos;
}
int32_t Tokenizer::eos_id() const {
  return impl_->vocab.eos;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
bool Tokenizer::is_eog(int32_t id) const {
  return impl_->eog.count(id) != 0;
}

std::vector<int32_t> Tokenizer::eog_ids() const {
  std::vector<int32_t> ids(impl_->eog.begin(), impl_->eog.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool Tokenizer::is_control(int32_t id) const {
  if (!impl_->vocab.valid(id)) return false;
  int t = impl_->vocab.types[static_cast<size_t>(id)];
  return t == kTypeControl || t == kTypeUnknown;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view piece) const {
  int32_t id = impl_->vocab.find(piece);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace hearth
