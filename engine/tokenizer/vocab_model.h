// Internal to engine/tokenizer: what the SentencePiece and the byte-level BPE tokenizers share
// (the vocabulary as the GGUF file states it) and the interface each one implements. The
// public Tokenizer (tokenizer.h) owns one Vocab and one VocabModel; special tokens are split
// out before a VocabModel sees any text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"

namespace hearth {
namespace gguf {
class File;
}

namespace tok {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4, kTypeUnused = 5, kTypeByte = 6;

struct Vocab {
  std::vector<std::string> pieces;  // tokenizer.ggml.tokens, by id
  std::vector<uint8_t> types;       // tokenizer.ggml.token_type, by id (kType*)
  // Piece -> id, views into `pieces`. Where a piece occurs twice the later id wins, as in
  // llama.cpp's token_to_id.
  std::unordered_map<std::string_view, int32_t> index;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1;  // -1: none

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  int32_t find(std::string_view piece) const {
    auto it = index.find(piece);
    return it == index.end() ? -1 : it->second;
  }
};

// One tokenization algorithm over a Vocab. Immutable after construction, safe to share
// between threads; it keeps a reference to the Vocab, which must outlive it.
class VocabModel {
 public:
  virtual ~VocabModel() = default;
  // Appends the ids of `text`, a fragment that holds no special token. `after_special`: the
  // fragment starts the text or follows a special token (SentencePiece's space prefix).
  virtual void encode_raw(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
  // The exact bytes a normal or byte token stands for (types kTypeNormal and kTypeByte).
  virtual std::string normal_bytes(int32_t id) const = 0;
  // add_bos when tokenizer.ggml.add_bos_token is absent (llama.cpp's default for this kind).
  virtual bool default_add_bos() const = 0;
};

// tokenizer.ggml.model = "llama": SentencePiece BPE with scores and byte fallback.
Result<std::unique_ptr<VocabModel>> make_spm_model(const gguf::File& f, const Vocab& vocab);
// tokenizer.ggml.model = "gpt2": byte-level BPE with merges and a pre-tokenizer.
Result<std::unique_ptr<VocabModel>> make_bpe_model(const gguf::File& f, const Vocab& vocab);

}  // namespace tok
}  // namespace hearth
