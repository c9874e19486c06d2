// Text <-> token ids for GGUF models, as llama.cpp tokenizes them:
//   tokenizer.ggml.model = "llama": SentencePiece BPE with scores and byte fallback (Gemma 3);
//   tokenizer.ggml.model = "gpt2":  byte-level BPE with merges and a pre-tokenizer chosen by
//                                   tokenizer.ggml.pre (Qwen2.5, SmolLM2, Llama 3).
// Encoding: 1. split at special-token strings (see special_split.h); 2. each raw fragment goes
// to the vocabulary's model (spm_model.cpp or bpe_model.cpp, behind vocab_model.h);
// 3. BOS (and EOS) when asked for and the model's metadata wants them.
// Sentencepiece and PCRE2 stay inside engine/tokenizer. A Tokenizer is immutable after
// from_gguf and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/tokenizer/chat_template.h"

namespace hearth {
namespace gguf {
class File;
}

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from the file; nothing is kept pointing into it.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& f);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_bos: add the model's BOS (and EOS) where its metadata asks for them
  // (tokenizer.ggml.add_bos_token / add_eos_token), like llama.cpp's add_special.
  // parse_special: control tokens written in the text ("<start_of_turn>") become single
  // tokens; false for anything a user typed. User-defined tokens always do (as in llama.cpp).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // A rendered chat: control tokens are recognised only inside markup segments. The segments
  // are tokenized as one text, so ids equal llama.cpp's for the concatenated prompt whenever
  // the user content holds no control-token strings. Adds no BOS (templates carry their own).
  std::vector<int32_t> encode_segments(const std::vector<ChatSegment>& segments) const;

  // The bytes a token stands for in output: SentencePiece byte tokens <0xAB> -> that byte and
  // U+2581 -> ' '; byte-level BPE characters -> their bytes (GPT-2's table reversed);
  // user-defined tokens as written, control/unknown/unused tokens -> "". May be part of a
  // UTF-8 character (for streaming, join bytes before showing them). Bad id -> "".
  std::string token_bytes(int32_t id) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // concatenated token_bytes
  std::string_view piece(int32_t id) const;                   // the vocabulary string; "" for a bad id

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the model has none
  int32_t eos_id() const;
  bool add_bos() const;  // tokenizer.ggml.add_bos_token
  // End of generation, as llama.cpp decides it: eos, eot/eom ids from the metadata;
  // <end_of_turn>, <|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <|endoftext|>, <EOT>,
  // <|end_of_text|>, <|return|>, <|call|> where the vocabulary has them; and the
  // fill-in-the-middle pad, repository and file-separator tokens (fim_*_token_id, else
  // <|fim_pad|>, <|repo_name|>, <|file_sep|>, <reponame>, ...).
  bool is_eog(int32_t id) const;
  std::vector<int32_t> eog_ids() const;  // every id is_eog accepts, ascending
  bool is_control(int32_t id) const;     // control or unknown type (never shown in output)
  std::optional<int32_t> find_token(std::string_view piece) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
