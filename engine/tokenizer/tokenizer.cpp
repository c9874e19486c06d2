#include "engine/tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/special_split.h"
#include "engine/tokenizer/spm_proto.h"

namespace hearth {
namespace {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4,
              kTypeUnused = 5, kTypeByte = 6;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, sentencepiece's space

// Text of end-of-turn tokens llama.cpp treats as end of generation when present.
constexpr std::string_view kEogTexts[] = {"<end_of_turn>", "<|eot_id|>",      "<|eom_id|>", "<|im_end|>",
                                          "<|end|>",       "<|endoftext|>",   "<EOT>",      "_<EOT>",
                                          "<|end_of_text|>", "<|return|>",    "<|call|>"};

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

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1.
int byte_of_piece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::vector<std::string> pieces;
  std::vector<uint8_t> types;
  std::unordered_map<std::string_view, int32_t> index;  // views into `pieces`
  std::unordered_set<int32_t> eog;
  std::unique_ptr<tok::SpecialSplitter> splitter;
  int32_t byte_ids[256];  // id of <0xXX>, or -1
  int32_t bos = -1, eos = -1;
  bool add_bos = true, add_eos = false, add_space_prefix = true;

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }

  void encode_raw(std::string_view raw, bool prefix_space, std::vector<int32_t>& out) const {
    std::string text;
    if (prefix_space) text.push_back(' ');
    text.append(raw);
    replace_all(text, " ", kSpaceMark);
    std::vector<int> ids;
    if (sp.Encode(text, &ids).ok()) {
      out.insert(out.end(), ids.begin(), ids.end());
      return;
    }
    // Not expected after a successful load; keep the bytes rather than lose the text.
    for (unsigned char c : text) {
      if (byte_ids[c] >= 0) out.push_back(byte_ids[c]);
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              const std::vector<uint8_t>& markup) const {
    std::vector<int32_t> out;
    if (add_special && add_bos && bos >= 0) out.push_back(bos);
    bool prev_special = true;  // llama.cpp: the space prefix goes at the start and after specials
    for (const tok::Fragment& f : splitter->split(text, parse_special, markup)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
      } else {
        encode_raw(text.substr(f.offset, f.length), add_space_prefix && prev_special, out);
        prev_special = false;
      }
    }
    if (add_special && add_eos && eos >= 0) out.push_back(eos);
    return out;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& f) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model.ok()) return make_error("tokenizer: " + model.error().message);
  if (*model != "llama") {
    return make_error("tokenizer: unsupported tokenizer.ggml.model '" + std::string(*model) +
                      "' (hearth supports 'llama', SentencePiece)");
  }
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return make_error("tokenizer: " + tokens.error().message);
  const size_t n = tokens->size();
  if (n == 0 || n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("tokenizer: tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  }

  std::vector<float> scores(n, 0.0f);
  if (f.has("tokenizer.ggml.scores")) {
    auto s = f.get_f32_array("tokenizer.ggml.scores");
    if (!s.ok()) return make_error("tokenizer: " + s.error().message);
    if (s->size() != n) return make_error("tokenizer: tokenizer.ggml.scores has " +
                                          std::to_string(s->size()) + " entries, tokens " +
                                          std::to_string(n));
    scores = std::move(*s);
  }
  std::vector<uint8_t> types(n, kTypeNormal);
  if (f.has("tokenizer.ggml.token_type")) {
    auto t = f.get_int_array("tokenizer.ggml.token_type");
    if (!t.ok()) return make_error("tokenizer: " + t.error().message);
    if (t->size() != n) return make_error("tokenizer: tokenizer.ggml.token_type has " +
                                          std::to_string(t->size()) + " entries, tokens " +
                                          std::to_string(n));
    for (size_t i = 0; i < n; ++i) {
      int64_t v = (*t)[i];
      if (v < kTypeNormal || v > kTypeByte) {
        return make_error("tokenizer: token " + std::to_string(i) + " has unknown type " +
                          std::to_string(v));
      }
      types[i] = static_cast<uint8_t>(v);
    }
  }

  auto read_id = [&](const char* key, int32_t& out) -> Status {
    out = -1;
    if (!f.has(key)) return {};
    auto v = f.get_int(key);
    if (!v.ok()) return make_error("tokenizer: " + v.error().message);
    if (*v < 0 || *v >= static_cast<int64_t>(n)) {
      return make_error(std::string("tokenizer: ") + key + " = " + std::to_string(*v) +
                        " is outside the vocabulary of " + std::to_string(n));
    }
    out = static_cast<int32_t>(*v);
    return {};
  };
  int32_t bos, eos, unk, pad, eot, eom;
  for (auto [key, out] : {std::pair{"tokenizer.ggml.bos_token_id", &bos},
                          {"tokenizer.ggml.eos_token_id", &eos},
                          {"tokenizer.ggml.unknown_token_id", &unk},
                          {"tokenizer.ggml.padding_token_id", &pad},
                          {"tokenizer.ggml.eot_token_id", &eot},
                          {"tokenizer.ggml.eom_token_id", &eom}}) {
    if (Status s = read_id(key, *out); !s.ok()) return s.error();
  }

  auto impl = std::make_unique<Impl>();
  impl->bos = bos;
  impl->eos = eos;
  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", true);
  auto add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  // A missing key means a space prefix, as llama.cpp reads SentencePiece vocabularies
  // (Gemma's converters write false explicitly).
  auto space = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  for (const auto* r : {&add_bos, &add_eos, &space}) {
    if (!r->ok()) return make_error("tokenizer: " + r->error().message);
  }
  impl->add_bos = *add_bos;
  impl->add_eos = *add_eos;
  impl->add_space_prefix = *space;

  impl->pieces.reserve(n);
  for (std::string_view t : *tokens) impl->pieces.emplace_back(t);
  impl->types = types;
  std::fill(std::begin(impl->byte_ids), std::end(impl->byte_ids), -1);
  impl->index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    impl->index.emplace(impl->pieces[i], static_cast<int32_t>(i));
    if (types[i] == kTypeByte) {
      int b = byte_of_piece(impl->pieces[i]);
      if (b < 0) {
        return make_error("tokenizer: byte token " + std::to_string(i) + " is '" +
                          impl->pieces[i] + "', not <0xXX>");
      }
      impl->byte_ids[b] = static_cast<int32_t>(i);
    }
  }

  // Sentencepiece needs exactly one UNKNOWN piece; GGUF files mark <unk> as control
  // (Gemma 3) or as unknown. Our own type table keeps what the file says.
  int32_t spm_unk = -1;
  for (size_t i = 0; i < n && spm_unk < 0; ++i) {
    if (types[i] == kTypeUnknown) spm_unk = static_cast<int32_t>(i);
  }
  if (spm_unk < 0) spm_unk = unk;
  if (spm_unk < 0) return make_error("tokenizer: the vocabulary has no unknown token");

  std::vector<spm::Piece> sp_pieces(n);
  bool has_bytes = false;
  for (size_t i = 0; i < n; ++i) {
    spm::PieceType t = spm::PieceType::Normal;
    switch (types[i]) {
      case kTypeUnknown: t = spm::PieceType::Control; break;
      case kTypeControl: t = spm::PieceType::Control; break;
      case kTypeUserDefined: t = spm::PieceType::UserDefined; break;
      case kTypeUnused: t = spm::PieceType::Unused; break;
      case kTypeByte: t = spm::PieceType::Byte, has_bytes = true; break;
      default: break;
    }
    if (static_cast<int32_t>(i) == spm_unk) t = spm::PieceType::Unknown;
    if (impl->pieces[i].empty()) {
      return make_error("tokenizer: token " + std::to_string(i) + " is empty");
    }
    sp_pieces[i] = {impl->pieces[i], scores[i], t};
  }
  spm::ModelSpec spec;
  spec.model_type = spm::ModelType::Bpe;  // llama.cpp's SPM tokenizer: BPE merges by score
  spec.byte_fallback = has_bytes;
  spec.unk_id = spm_unk;
  spec.bos_id = bos;
  spec.eos_id = eos;
  spec.pad_id = pad;
  // Spaces are escaped to U+2581 by us (as llama.cpp does) and no other normalization runs.
  spec.add_dummy_prefix = false;
  spec.remove_extra_whitespaces = false;
  spec.escape_whitespaces = false;
  auto status = impl->sp.LoadFromSerializedProto(spm::serialize_model_proto(sp_pieces, spec));
  if (!status.ok()) return make_error("tokenizer: sentencepiece: " + status.ToString());

  std::vector<tok::SpecialSplitter::Special> specials;
  for (size_t i = 0; i < n; ++i) {
    int t = types[i];
    if (t == kTypeControl || t == kTypeUnknown || t == kTypeUserDefined) {
      specials.push_back({static_cast<int32_t>(i), impl->pieces[i], t != kTypeUserDefined});
    }
  }
  impl->splitter = std::make_unique<tok::SpecialSplitter>(std::move(specials));

  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) impl->eog.insert(id);
  }
  for (std::string_view text : kEogTexts) {
    if (auto it = impl->index.find(text); it != impl->index.end()) impl->eog.insert(it->second);
  }
  for (const FimEog& fim : kFimEog) {
    int32_t id = -1;
    if (Status s = read_id(fim.key, id); !s.ok()) return s.error();
    for (std::string_view text : fim.texts) {
      if (id >= 0) break;
      if (auto it = impl->index.find(text); it != impl->index.end()) id = it->second;
    }
    if (id >= 0) impl->eog.insert(id);
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
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
  if (!impl_->valid(id)) return {};
  const std::string& p = impl_->pieces[static_cast<size_t>(id)];
  switch (impl_->types[static_cast<size_t>(id)]) {
    case kTypeNormal: {
      std::string s = p;
      replace_all(s, kSpaceMark, " ");
      return s;
    }
    case kTypeUserDefined:
      return p;
    case kTypeByte:
      return std::string(1, static_cast<char>(byte_of_piece(p)));
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
  return impl_->valid(id) ? std::string_view(impl_->pieces[static_cast<size_t>(id)])
                          : std::string_view();
}

int32_t Tokenizer::n_vocab() const { return impl_->size(); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::is_eog(int32_t id) const { return impl_->eog.count(id) != 0; }

std::vector<int32_t> Tokenizer::eog_ids() const {
  std::vector<int32_t> ids(impl_->eog.begin(), impl_->eog.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool Tokenizer::is_control(int32_t id) const {
  if (!impl_->valid(id)) return false;
  int t = impl_->types[static_cast<size_t>(id)];
  return t == kTypeControl || t == kTypeUnknown;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view piece) const {
  auto it = impl_->index.find(piece);
  if (it == impl_->index.end()) return std::nullopt;
  return it->second;
}

}  // namespace hearth
