// Writes a sentencepiece ModelProto (src/sentencepiece_model.proto, proto2) as protobuf bytes,
// so the tokenizer can build a SentencePieceProcessor from GGUF vocabulary without linking
// libprotobuf or needing sentencepiece_model.pb.h (Debian does not ship it).
// Internal to engine/tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::spm {

// ModelProto.SentencePiece.Type values.
enum class PieceType : int { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
// TrainerSpec.ModelType values.
enum class ModelType : int { Unigram = 1, Bpe = 2 };

struct Piece {
  std::string_view text;  // must outlive the call only
  float score;
  PieceType type;
};

struct ModelSpec {
  ModelType model_type = ModelType::Bpe;
  bool byte_fallback = true;
  int32_t unk_id = 0;  // ids are -1 when absent (unk must exist)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  // NormalizerSpec: "identity" with no charsmap, i.e. no normalization.
  bool add_dummy_prefix = false;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = false;
};

// Serialized ModelProto {pieces = 1, trainer_spec = 2, normalizer_spec = 3}.
std::string serialize_model_proto(const std::vector<Piece>& pieces, const ModelSpec& spec);

}  // namespace hearth::spm
