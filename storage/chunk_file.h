// One chunk file: a fixed 144-byte header, the chunk's token ids, then the payload.
//
//   offset  size  field (little-endian)
//        0     8  magic "HEARTHKV"
//        8     4  format version (kChunkFormatVersion)
//       12     4  header size in bytes (144)
//       16    32  model fingerprint, ASCII, zero-padded
//       48     4  KV dtype (numeric hearth::DType)
//       52     4  n_layer
//       56     4  kv_dim (elements per token per layer, for K and for V each)
//       60     4  row_bytes: bytes of one token's K (= V) row of one layer (version 4)
//       64     8  chain hash of the chunk (also its file name)
//       72     8  chain hash of the parent chunk, 0 for the first
//       80     4  n_tokens
//       84     4  owner: uid whose request wrote the chunk
//       88     8  payload size in bytes = n_tokens * bytes_per_token()
//       96     8  XXH3-64 of the token ids (n_tokens int32)
//      104     8  XXH3-64 of the payload's first section (full-attention layers)
//      112     8  scope: root of the chunk's hash chain
//      120     4  n_sliding: layers in the second section (sliding-window layers)
//      124     4  zero
//      128     8  XXH3-64 of the payload's second section (empty when n_sliding is 0)
//      136     8  XXH3-64 of bytes 0..135
//      144  4*n   token ids, int32
//        …     …  payload: the full-attention layers, then the sliding-window layers; each
//                 layer K then V, token by token, one row_bytes row each
//
// The file is exactly 144 + 4 * n_tokens + payload bytes long; anything else is invalid.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "storage/chunk_store.h"
#include "storage/file_ops.h"

namespace hearth::storage {

inline constexpr size_t kChunkHeaderBytes = 144;

struct ChunkHeader {
  KvFormat format;
  uint64_t hash = 0;
  uint64_t parent = 0;
  uint64_t scope = 0;
  uint32_t owner = 0;
  uint32_t n_tokens = 0;
  uint64_t payload_bytes = 0;
  uint64_t tokens_checksum = 0;
  uint64_t global_checksum = 0;   // of the payload's first section
  uint64_t sliding_checksum = 0;  // of its second section
  uint64_t file_bytes() const { return kChunkHeaderBytes + uint64_t{4} * n_tokens + payload_bytes; }
  uint64_t global_bytes() const { return uint64_t{n_tokens} * format.global_bytes_per_token(); }
};

uint64_t checksum64(const void* data, size_t n);

// The header followed by the token ids: what is written before the payload.
std::vector<uint8_t> encode_chunk_prefix(const KvFormat& format, const ChunkWrite& chunk);
// Parses kChunkHeaderBytes bytes; checks magic, version (kChunkFormatVersion only), header
// size and header checksum, and that the sizes are consistent. Does not compare with any store's format.
Result<ChunkHeader> decode_chunk_header(std::span<const uint8_t> bytes);
bool same_format(const KvFormat& a, const KvFormat& b);

// Whether row_bytes is what kv_dim elements of kv_dtype take (a known type, kv_dim a
// multiple of its block): a format or header that disagrees with itself is refused.
bool row_bytes_match(const KvFormat& f);
// A string naming a format in the index, e.g. "<fingerprint>:1:18:256:2:v1".
std::string format_key(const KvFormat& format);

// "ab/abcdef0123456789.kv": the path of a chunk under the chunks directory (fan-out by the
// first byte, 256 subdirectories at most).
std::string chunk_relative_path(uint64_t hash);
// True for "abcdef0123456789.kv" (16 lowercase hex digits), setting *hash.
bool parse_chunk_file_name(std::string_view name, uint64_t* hash);
// Temp files are ".<16 hex>.kv.tmp" next to their final name.
bool is_temp_file_name(std::string_view name);
std::string temp_file_name(uint64_t hash);

// Reading a chunk file back.
// kOtherScope: a valid chunk whose scope is not the expected one (a miss, never deleted).
enum class ReadError { kNone, kMissing, kIo, kInvalid, kOtherScope };
struct ChunkRead {
  ReadError error = ReadError::kNone;
  std::string detail;  // why, when error != kNone
  ChunkHeader header;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> payload;
};
struct ReadExpect {
  const KvFormat* format = nullptr;  // must equal the file's, when set
  uint64_t hash = 0;                 // must equal the header's
  std::optional<uint64_t> scope;     // must equal the header's, when set
  std::span<const int32_t> tokens;   // must equal the file's, when with_tokens
  bool with_tokens = false;
  bool keep_payload = true;            // false: verify it, then drop it
  bool skip_payload = false;           // true: check header and token ids only
  Sections sections = Sections::kAll;  // kGlobal: read and verify the first section only
};
// Opens `path`, verifies everything (sizes, checksums, the expectations) and returns the
// parts. kMissing when the file does not exist, kIo for other read errors, kInvalid for any
// mismatch or damage.
ChunkRead read_chunk_file(FileOps& ops, const std::string& path, const ReadExpect& expect);

}  // namespace hearth::storage
