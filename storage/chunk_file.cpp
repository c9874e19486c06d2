#include "storage/chunk_file.h"

#include <fcntl.h>
#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "common/dtype.h"

namespace hearth::storage {
namespace {

static_assert(std::endian::native == std::endian::little, "chunk files are little-endian; add byte swaps");

constexpr char kMagic[8] = {'H', 'E', 'A', 'R', 'T', 'H', 'K', 'V'};
constexpr size_t kFingerprintBytes = 32;
constexpr size_t kHeaderChecksumAt = kChunkHeaderBytes - 8;

template <class T>
void put(uint8_t* base, size_t at, T v) {
  std::memcpy(base + at, &v, sizeof v);
}
template <class T>
T get(const uint8_t* base, size_t at) {
  T v;
  std::memcpy(&v, base + at, sizeof v);
  return v;
}

// Reads exactly n bytes at offset; false with errno set, or errno == 0 on a short file.
bool pread_full(FileOps& ops, int fd, void* data, size_t n, off_t offset) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = ops.pread(fd, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) {
      errno = 0;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

char hex_digit(unsigned v) {
  return "0123456789abcdef"[v & 15];
}

}  // namespace

uint64_t checksum64(const void* data, size_t n) {
  return XXH3_64bits(data, n);
}

std::vector<uint8_t> encode_chunk_prefix(const KvFormat& format, const ChunkWrite& chunk) {
  const size_t n = chunk.tokens.size();
  std::vector<uint8_t> out(kChunkHeaderBytes + 4 * n, 0);
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, sizeof kMagic);
  put<uint32_t>(h, 8, format.version);
  put<uint32_t>(h, 12, static_cast<uint32_t>(kChunkHeaderBytes));
  std::memcpy(h + 16, format.model_fingerprint.data(), std::min(format.model_fingerprint.size(), kFingerprintBytes));
  put<uint32_t>(h, 48, format.kv_dtype);
  put<uint32_t>(h, 52, format.n_layer);
  put<uint32_t>(h, 56, format.kv_dim);
  put<uint32_t>(h, 60, format.row_bytes);
  put<uint64_t>(h, 64, chunk.hash);
  put<uint64_t>(h, 72, chunk.parent);
  put<uint32_t>(h, 80, static_cast<uint32_t>(n));
  put<uint32_t>(h, 84, chunk.owner);
  put<uint64_t>(h, 112, chunk.scope);
  put<uint64_t>(h, 88, chunk.payload.size());
  put<uint64_t>(h, 96, checksum64(chunk.tokens.data(), 4 * n));
  const size_t global = std::min(chunk.payload.size(), n * format.global_bytes_per_token());
  put<uint64_t>(h, 104, checksum64(chunk.payload.data(), global));
  put<uint32_t>(h, 120, format.n_sliding);
  put<uint64_t>(h, 128, checksum64(chunk.payload.data() + global, chunk.payload.size() - global));
  put<uint64_t>(h, kHeaderChecksumAt, checksum64(h, kHeaderChecksumAt));
  if (n > 0) std::memcpy(h + kChunkHeaderBytes, chunk.tokens.data(), 4 * n);
  return out;
}

Result<ChunkHeader> decode_chunk_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < kChunkHeaderBytes) return make_error("chunk header truncated");
  const uint8_t* h = bytes.data();
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) return make_error("not a chunk file (bad magic)");
  if (get<uint64_t>(h, kHeaderChecksumAt) != checksum64(h, kHeaderChecksumAt)) {
    return make_error("chunk header checksum mismatch");
  }
  if (get<uint32_t>(h, 12) != kChunkHeaderBytes) return make_error("unexpected chunk header size");
  ChunkHeader c;
  c.format.version = get<uint32_t>(h, 8);
  if (c.format.version != kChunkFormatVersion) {
    return make_error("chunk format version " + std::to_string(c.format.version) + ", expected " +
                      std::to_string(kChunkFormatVersion));
  }
  const char* fp = reinterpret_cast<const char*>(h + 16);
  c.format.model_fingerprint.assign(fp, strnlen(fp, kFingerprintBytes));
  c.format.kv_dtype = get<uint32_t>(h, 48);
  c.format.n_layer = get<uint32_t>(h, 52);
  c.format.kv_dim = get<uint32_t>(h, 56);
  c.format.row_bytes = get<uint32_t>(h, 60);
  c.hash = get<uint64_t>(h, 64);
  c.parent = get<uint64_t>(h, 72);
  c.n_tokens = get<uint32_t>(h, 80);
  c.owner = get<uint32_t>(h, 84);
  c.scope = get<uint64_t>(h, 112);
  c.payload_bytes = get<uint64_t>(h, 88);
  c.tokens_checksum = get<uint64_t>(h, 96);
  c.global_checksum = get<uint64_t>(h, 104);
  c.format.n_sliding = get<uint32_t>(h, 120);
  c.sliding_checksum = get<uint64_t>(h, 128);
  // Bounds far above any real model keep the size arithmetic below 2^62 (no overflow).
  if (c.format.n_layer > 4096 || c.format.kv_dim > (1u << 20) || c.format.row_bytes > (1u << 24) ||
      c.n_tokens > (1u << 24) || c.format.n_sliding > c.format.n_layer || get<uint32_t>(h, 124) != 0 ||
      !row_bytes_match(c.format)) {
    return make_error("chunk header fields out of range");
  }
  if (c.n_tokens == 0 || c.payload_bytes != uint64_t{c.n_tokens} * c.format.bytes_per_token()) {
    return make_error("chunk header sizes are inconsistent");
  }
  return c;
}

bool row_bytes_match(const KvFormat& f) {
  const std::optional<DTypeInfo> t = dtype_info(f.kv_dtype);
  return t && f.kv_dim % t->block_elems == 0 && f.row_bytes == row_bytes(static_cast<DType>(f.kv_dtype), f.kv_dim);
}

bool same_format(const KvFormat& a, const KvFormat& b) {
  return a.model_fingerprint == b.model_fingerprint && a.kv_dtype == b.kv_dtype && a.n_layer == b.n_layer &&
         a.kv_dim == b.kv_dim && a.row_bytes == b.row_bytes && a.n_sliding == b.n_sliding && a.version == b.version;
}

std::string format_key(const KvFormat& f) {
  return f.model_fingerprint + ":" + std::to_string(f.kv_dtype) + ":" + std::to_string(f.n_layer) + ":" +
         std::to_string(f.kv_dim) + ":" + std::to_string(f.row_bytes) + ":s" + std::to_string(f.n_sliding) + ":v" +
         std::to_string(f.version);
}

std::string chunk_relative_path(uint64_t hash) {
  std::string name(16, '0');
  for (int i = 0; i < 16; ++i) name[static_cast<size_t>(i)] = hex_digit(static_cast<unsigned>(hash >> (60 - 4 * i)));
  return name.substr(0, 2) + "/" + name + ".kv";
}

bool parse_chunk_file_name(std::string_view name, uint64_t* hash) {
  if (name.size() != 19 || name.substr(16) != ".kv") return false;
  uint64_t v = 0;
  for (size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else {
      return false;
    }
    v = (v << 4) | d;
  }
  *hash = v;
  return true;
}

bool is_temp_file_name(std::string_view name) {
  return name.size() > 8 && name.front() == '.' && name.substr(name.size() - 7) == ".kv.tmp";
}

std::string temp_file_name(uint64_t hash) {
  const std::string rel = chunk_relative_path(hash);
  std::string name(1, '.');
  name.append(rel, 3, std::string::npos);
  name.append(".tmp");
  return name;
}

ChunkRead read_chunk_file(FileOps& ops, const std::string& path, const ReadExpect& expect) {
  ChunkRead out;
  auto fail = [&out](ReadError e, std::string why) {
    out.error = e;
    out.detail = std::move(why);
    out.tokens.clear();
    out.payload.clear();
    return std::move(out);
  };
  const int fd = ops.open(path.c_str(), O_RDONLY, 0);
  if (fd < 0) {
    const int err = errno;
    return fail(err == ENOENT ? ReadError::kMissing : ReadError::kIo, std::strerror(err));
  }
  struct FdCloser {
    FileOps& ops;
    int fd;
    ~FdCloser() { ops.close(fd); }
  } closer{ops, fd};

  struct stat st {};
  if (ops.fstat(fd, &st) != 0) return fail(ReadError::kIo, std::strerror(errno));
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kChunkHeaderBytes) return fail(ReadError::kInvalid, "file shorter than a chunk header");

  // Header and token ids in one read when the caller knows the token count.
  const size_t guess_tokens = expect.with_tokens ? expect.tokens.size() : 0;
  std::vector<uint8_t> prefix(kChunkHeaderBytes + 4 * guess_tokens);
  if (prefix.size() > file_bytes) prefix.resize(kChunkHeaderBytes);
  if (!pread_full(ops, fd, prefix.data(), prefix.size(), 0)) {
    return errno ? fail(ReadError::kIo, std::strerror(errno)) : fail(ReadError::kInvalid, "file truncated");
  }
  auto header = decode_chunk_header(prefix);
  if (!header) return fail(ReadError::kInvalid, header.error().message);
  const ChunkHeader& h = *header;
  if (expect.format && !same_format(*expect.format, h.format)) {
    return fail(ReadError::kInvalid, "chunk of another model or KV format");
  }
  if (h.hash != expect.hash) return fail(ReadError::kInvalid, "chunk hash differs from its file name");
  if (expect.scope && h.scope != *expect.scope) return fail(ReadError::kOtherScope, "chunk of another cache scope");
  if (expect.with_tokens && h.n_tokens != expect.tokens.size()) return fail(ReadError::kInvalid, "token count differs");
  if (h.file_bytes() != file_bytes) return fail(ReadError::kInvalid, "file size differs from its header");

  const size_t tokens_bytes = 4 * size_t{h.n_tokens};
  if (prefix.size() != kChunkHeaderBytes + tokens_bytes) {
    prefix.resize(kChunkHeaderBytes + tokens_bytes);
    if (!pread_full(ops, fd, prefix.data() + kChunkHeaderBytes, tokens_bytes, kChunkHeaderBytes)) {
      return errno ? fail(ReadError::kIo, std::strerror(errno)) : fail(ReadError::kInvalid, "file truncated");
    }
  }
  const uint8_t* token_bytes = prefix.data() + kChunkHeaderBytes;
  if (checksum64(token_bytes, tokens_bytes) != h.tokens_checksum) {
    return fail(ReadError::kInvalid, "token ids checksum mismatch");
  }
  if (expect.with_tokens && std::memcmp(token_bytes, expect.tokens.data(), tokens_bytes) != 0) {
    return fail(ReadError::kInvalid, "token ids differ from the expected ones");
  }

  if (expect.skip_payload) {
    out.tokens.resize(h.n_tokens);
    std::memcpy(out.tokens.data(), token_bytes, tokens_bytes);
    out.header = h;
    return out;
  }
  const uint64_t global = h.global_bytes();
  out.payload.resize(expect.sections == Sections::kGlobal ? global : h.payload_bytes);
  if (!pread_full(ops, fd, out.payload.data(), out.payload.size(),
                  static_cast<off_t>(kChunkHeaderBytes + tokens_bytes))) {
    return errno ? fail(ReadError::kIo, std::strerror(errno)) : fail(ReadError::kInvalid, "file truncated");
  }
  if (checksum64(out.payload.data(), global) != h.global_checksum) {
    return fail(ReadError::kInvalid, "payload checksum mismatch (full-attention layers)");
  }
  if (out.payload.size() > global &&
      checksum64(out.payload.data() + global, out.payload.size() - global) != h.sliding_checksum) {
    return fail(ReadError::kInvalid, "payload checksum mismatch (sliding-window layers)");
  }
  if (!expect.keep_payload) out.payload = {};
  out.tokens.resize(h.n_tokens);
  std::memcpy(out.tokens.data(), token_bytes, tokens_bytes);
  out.header = h;
  return out;
}

}  // namespace hearth::storage
