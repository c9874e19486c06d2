// SentencePiece vocabularies (tokenizer.ggml.model = "llama"; Gemma 3 uses it), reproducing
// llama.cpp's "SPM" tokenizer on each raw fragment: optional leading space
// (tokenizer.ggml.add_space_prefix, at the start and after every special token),
// ' ' -> U+2581, then BPE merges by piece score with byte fallback — done by sentencepiece's
// BPE model, built in memory from the GGUF vocabulary (same algorithm, same tie-breaking:
// higher score first, then leftmost). Only this file includes sentencepiece.
#include <sentencepiece_processor.h>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/spm_proto.h"
#include "engine/tokenizer/vocab_model.h"

namespace hearth::tok {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, sentencepiece's space

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

class SpmModel final : public VocabModel {
 public:
  SpmModel(const Vocab& vocab, bool add_space_prefix) : vocab_(vocab), add_space_prefix_(add_space_prefix) {}

  Status load(const gguf::File& f) {
    const size_t n = vocab_.pieces.size();
    std::vector<float> scores(n, 0.0f);
    if (f.has("tokenizer.ggml.scores")) {
      auto s = f.get_f32_array("tokenizer.ggml.scores");
      if (!s.ok()) return make_error("tokenizer: " + s.error().message);
      if (s->size() != n)
        return make_error("tokenizer: tokenizer.ggml.scores has " + std::to_string(s->size()) + " entries, tokens " +
                          std::to_string(n));
      scores = std::move(*s);
    }
    std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
    for (size_t i = 0; i < n; ++i) {
      if (vocab_.types[i] != kTypeByte) continue;
      int b = byte_of_piece(vocab_.pieces[i]);
      if (b < 0) {
        return make_error("tokenizer: byte token " + std::to_string(i) + " is '" + vocab_.pieces[i] + "', not <0xXX>");
      }
      byte_ids_[b] = static_cast<int32_t>(i);
    }

    // Sentencepiece needs exactly one UNKNOWN piece; GGUF files mark <unk> as control
    // (Gemma 3) or as unknown. Our own type table keeps what the file says.
    int32_t spm_unk = -1;
    for (size_t i = 0; i < n && spm_unk < 0; ++i) {
      if (vocab_.types[i] == kTypeUnknown) spm_unk = static_cast<int32_t>(i);
    }
    if (spm_unk < 0) spm_unk = vocab_.unk;
    if (spm_unk < 0) return make_error("tokenizer: the vocabulary has no unknown token");

    std::vector<spm::Piece> sp_pieces(n);
    bool has_bytes = false;
    for (size_t i = 0; i < n; ++i) {
      spm::PieceType t = spm::PieceType::Normal;
      switch (vocab_.types[i]) {
        case kTypeUnknown:
          t = spm::PieceType::Control;
          break;
        case kTypeControl:
          t = spm::PieceType::Control;
          break;
        case kTypeUserDefined:
          t = spm::PieceType::UserDefined;
          break;
        case kTypeUnused:
          t = spm::PieceType::Unused;
          break;
        case kTypeByte:
          t = spm::PieceType::Byte, has_bytes = true;
          break;
        default:
          break;
      }
      if (static_cast<int32_t>(i) == spm_unk) t = spm::PieceType::Unknown;
      if (vocab_.pieces[i].empty()) {
        return make_error("tokenizer: token " + std::to_string(i) + " is empty");
      }
      sp_pieces[i] = {vocab_.pieces[i], scores[i], t};
    }
    spm::ModelSpec spec;
    spec.model_type = spm::ModelType::Bpe;  // llama.cpp's SPM tokenizer: BPE merges by score
    spec.byte_fallback = has_bytes;
    spec.unk_id = spm_unk;
    spec.bos_id = vocab_.bos;
    spec.eos_id = vocab_.eos;
    spec.pad_id = vocab_.pad;
    // Spaces are escaped to U+2581 by us (as llama.cpp does) and no other normalization runs.
    spec.add_dummy_prefix = false;
    spec.remove_extra_whitespaces = false;
    spec.escape_whitespaces = false;
    auto status = sp_.LoadFromSerializedProto(spm::serialize_model_proto(sp_pieces, spec));
    if (!status.ok()) return make_error("tokenizer: sentencepiece: " + status.ToString());
    return {};
  }

  void encode_raw(std::string_view raw, bool after_special, std::vector<int32_t>& out) const override {
    std::string text;
    if (add_space_prefix_ && after_special) text.push_back(' ');
    text.append(raw);
    replace_all(text, " ", kSpaceMark);
    std::vector<int> ids;
    if (sp_.Encode(text, &ids).ok()) {
      out.insert(out.end(), ids.begin(), ids.end());
      return;
    }
    // Not expected after a successful load; keep the bytes rather than lose the text.
    for (unsigned char c : text) {
      if (byte_ids_[c] >= 0) out.push_back(byte_ids_[c]);
    }
  }

  std::string normal_bytes(int32_t id) const override {
    const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
    if (vocab_.types[static_cast<size_t>(id)] == kTypeByte) {
      return std::string(1, static_cast<char>(byte_of_piece(p)));
    }
    std::string s = p;
    replace_all(s, kSpaceMark, " ");
    return s;
  }

  bool default_add_bos() const override { return true; }

 private:
  const Vocab& vocab_;
  bool add_space_prefix_;
  sentencepiece::SentencePieceProcessor sp_;
  int32_t byte_ids_[256];  // id of <0xXX>, or -1
};

}  // namespace

Result<std::unique_ptr<VocabModel>> make_spm_model(const gguf::File& f, const Vocab& vocab) {
  // A missing key means a space prefix, as llama.cpp reads SentencePiece vocabularies
  // (Gemma's converters write false explicitly).
  auto space = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  if (!space.ok()) return make_error("tokenizer: " + space.error().message);
  auto model = std::make_unique<SpmModel>(vocab, *space);
  if (Status s = model->load(f); !s.ok()) return s.error();
  return std::unique_ptr<VocabModel>(std::move(model));
}

}  // namespace hearth::tok
