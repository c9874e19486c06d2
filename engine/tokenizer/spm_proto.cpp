#include "engine/tokenizer/spm_proto.h"

#include <cstring>

namespace hearth::spm {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Field numbers from google/sentencepiece src/sentencepiece_model.proto.
constexpr int kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr int kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr int kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerByteFallback = 35;
constexpr int kTrainerUnkId = 40, kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43;
constexpr int kTrainerUnkPiece = 45, kTrainerBosPiece = 46, kTrainerEosPiece = 47, kTrainerPadPiece = 48;
constexpr int kNormName = 1, kNormAddDummyPrefix = 3, kNormRemoveExtraWhitespaces = 4, kNormEscapeWhitespaces = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, int field, int wire) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
}

// int32 fields encode negative values as 10-byte sign-extended varints.
void put_int(std::string& out, int field, int64_t v) {
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_float(std::string& out, int field, float v) {
  put_tag(out, field, kFixed32);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

}  // namespace

std::string serialize_model_proto(const std::vector<Piece>& pieces, const ModelSpec& spec) {
  std::string out;
  std::string msg;
  for (const Piece& p : pieces) {
    msg.clear();
    put_bytes(msg, kPieceText, p.text);
    put_float(msg, kPieceScore, p.score);
    put_int(msg, kPieceType, static_cast<int>(p.type));
    put_bytes(out, kModelPieces, msg);
  }

  auto piece_text = [&](int32_t id) { return std::string_view(pieces[static_cast<size_t>(id)].text); };
  msg.clear();
  put_int(msg, kTrainerModelType, static_cast<int>(spec.model_type));
  put_int(msg, kTrainerVocabSize, static_cast<int64_t>(pieces.size()));
  put_int(msg, kTrainerByteFallback, spec.byte_fallback ? 1 : 0);
  put_int(msg, kTrainerUnkId, spec.unk_id);
  put_int(msg, kTrainerBosId, spec.bos_id);
  put_int(msg, kTrainerEosId, spec.eos_id);
  put_int(msg, kTrainerPadId, spec.pad_id);
  if (spec.unk_id >= 0) put_bytes(msg, kTrainerUnkPiece, piece_text(spec.unk_id));
  if (spec.bos_id >= 0) put_bytes(msg, kTrainerBosPiece, piece_text(spec.bos_id));
  if (spec.eos_id >= 0) put_bytes(msg, kTrainerEosPiece, piece_text(spec.eos_id));
  if (spec.pad_id >= 0) put_bytes(msg, kTrainerPadPiece, piece_text(spec.pad_id));
  put_bytes(out, kModelTrainerSpec, msg);

  msg.clear();
  put_bytes(msg, kNormName, "identity");
  put_int(msg, kNormAddDummyPrefix, spec.add_dummy_prefix ? 1 : 0);
  put_int(msg, kNormRemoveExtraWhitespaces, spec.remove_extra_whitespaces ? 1 : 0);
  put_int(msg, kNormEscapeWhitespaces, spec.escape_whitespaces ? 1 : 0);
  put_bytes(out, kModelNormalizerSpec, msg);
  return out;
}

}  // namespace hearth::spm
