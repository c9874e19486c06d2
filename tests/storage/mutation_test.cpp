// Every mutation of a valid chunk file — each bit flipped, every truncation, appended
// bytes, random multi-byte damage — is detected: the reader never crashes and never
// returns a payload. A sample of them also goes through the whole store.
#include <catch2/catch.hpp>
#include <random>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

// Serves one file from memory, so thousands of mutations cost no disk I/O.
class BufferFileOps : public FileOps {
 public:
  std::vector<uint8_t> data;
  int open(const char*, int, mode_t) override { return kFd; }
  ssize_t pread(int fd, void* out, size_t n, off_t off) override {
    if (fd != kFd) return FileOps::pread(fd, out, n, off);
    if (static_cast<size_t>(off) >= data.size()) return 0;
    n = std::min(n, data.size() - static_cast<size_t>(off));
    std::memcpy(out, data.data() + off, n);
    return static_cast<ssize_t>(n);
  }
  int fstat(int fd, struct stat* st) override {
    if (fd != kFd) return FileOps::fstat(fd, st);
    *st = {};
    st->st_size = static_cast<off_t>(data.size());
    return 0;
  }
  int close(int fd) override { return fd == kFd ? 0 : FileOps::close(fd); }

 private:
  static constexpr int kFd = 1 << 20;
};

struct Fixture {
  TempDir tmp;
  KvFormat f;
  ChunkWrite chunk;
  std::string path;
  std::vector<uint8_t> original;
  Fixture() {
    // 2 layers (one full-attention, one sliding-window) x (K + V) x 4 elements x 2 bytes =
    // 32 bytes a token; 4 tokens: a 144 + 16 + 128 = 288-byte file.
    f = small_format();
    f.n_layer = 2;
    f.n_sliding = 1;
    f.kv_dim = 4;
    f.row_bytes = 8;
    chunk = make_chunk(0x0123456789abcdefull, 0x42, f, 4);
    auto s = open_store(tmp.path(), f);
    REQUIRE(s);
    REQUIRE(s->enqueue(chunk));
    s->close(kHangGuard);
    path = chunk_path(tmp.path(), chunk.hash);
    original = read_bytes(path);
    REQUIRE(original.size() == 288);
  }
  // What load() checks, without the store around it.
  ChunkRead read(const std::vector<uint8_t>& bytes, Sections sections = Sections::kAll) {
    ops.data = bytes;
    ReadExpect e;
    e.format = &f;
    e.hash = chunk.hash;
    e.tokens = chunk.tokens;
    e.with_tokens = true;
    e.sections = sections;
    return read_chunk_file(ops, path, e);
  }
  BufferFileOps ops;
};

}  // namespace

TEST_CASE("prompt cache: the untouched chunk file reads back", "[storage][mutation]") {
  Fixture fx;
  ChunkRead r = fx.read(fx.original);
  REQUIRE(r.error == ReadError::kNone);
  CHECK(r.payload == fx.chunk.payload);
  CHECK(r.tokens == fx.chunk.tokens);
  CHECK(r.header.parent == 0x42);
}

// A restore reads the second section (sliding-window layers) only near a prefix's end: a
// read of the first section alone returns exactly that section, verified on its own, and
// damage past it is found by the next read that includes it.
TEST_CASE("prompt cache: a read of the first section verifies it alone", "[storage][mutation]") {
  Fixture fx;
  const size_t global = 4 * fx.f.global_bytes_per_token();
  REQUIRE(global == 64);
  ChunkRead r = fx.read(fx.original, Sections::kGlobal);
  REQUIRE(r.error == ReadError::kNone);
  CHECK(r.payload == std::vector<uint8_t>(fx.chunk.payload.begin(), fx.chunk.payload.begin() + global));
  const size_t payload_at = fx.original.size() - fx.chunk.payload.size();
  for (size_t at : {payload_at, payload_at + global - 1, payload_at + global, fx.original.size() - 1}) {
    INFO("byte " << at);
    auto bytes = fx.original;
    bytes[at] ^= 0x10;
    const bool in_first = at < payload_at + global;
    CHECK((fx.read(bytes, Sections::kGlobal).error == ReadError::kInvalid) == in_first);
    CHECK(fx.read(bytes).error == ReadError::kInvalid);
  }
}

TEST_CASE("prompt cache: every single bit flip is detected", "[storage][mutation]") {
  Fixture fx;
  size_t undetected = 0;
  for (size_t i = 0; i < fx.original.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = fx.original;
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
      ChunkRead r = fx.read(bytes);
      if (r.error != ReadError::kInvalid || !r.payload.empty()) {
        ++undetected;
        UNSCOPED_INFO("byte " << i << " bit " << bit);
      }
    }
  }
  CHECK(undetected == 0);
}

TEST_CASE("prompt cache: every truncation and any appended bytes are detected", "[storage][mutation]") {
  Fixture fx;
  for (size_t n = 0; n < fx.original.size(); ++n) {
    ChunkRead r = fx.read(std::vector<uint8_t>(fx.original.begin(), fx.original.begin() + static_cast<long>(n)));
    INFO("truncated to " << n);
    CHECK(r.error == ReadError::kInvalid);
    CHECK(r.payload.empty());
  }
  auto longer = fx.original;
  longer.push_back(0);
  CHECK(fx.read(longer).error == ReadError::kInvalid);
}

TEST_CASE("prompt cache: random damage is detected, by the reader and by the store", "[storage][mutation]") {
  Fixture fx;
  std::mt19937_64 rng(20261202);
  for (int round = 0; round < 2000; ++round) {
    auto bytes = fx.original;
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) {  // a few random bytes set to random values
      const int n = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < n; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    } else if (kind == 1) {  // a run overwritten with zeros (a torn write)
      const size_t at = rng() % bytes.size();
      const size_t len = 1 + rng() % 64;
      for (size_t k = at; k < std::min(bytes.size(), at + len); ++k) bytes[k] = 0;
    } else {  // truncated and padded back with garbage
      const size_t at = rng() % bytes.size();
      for (size_t k = at; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(rng());
    }
    if (bytes == fx.original) continue;
    ChunkRead r = fx.read(bytes);
    INFO("round " << round);
    REQUIRE(r.error == ReadError::kInvalid);
    REQUIRE(r.payload.empty());
  }
  // Through the store: 20 damaged files in a row, each a miss, deleted, counted.
  auto s = open_store(fx.tmp.path(), fx.f);
  REQUIRE(s);
  for (int round = 0; round < 20; ++round) {
    REQUIRE(s->contains(fx.chunk.hash));
    auto bytes = fx.original;
    bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    write_bytes(fx.path, bytes);
    CHECK_FALSE(s->load(fx.chunk.hash, fx.chunk.tokens));
    CHECK_FALSE(fs::exists(fx.path));
    REQUIRE(s->enqueue(fx.chunk));
    REQUIRE(wait_idle(*s));
  }
  CHECK(s->stats().checksum_failures == 20);
  auto got = s->load(fx.chunk.hash, fx.chunk.tokens);
  REQUIRE(got);
  CHECK(*got == fx.chunk.payload);
  REQUIRE(s->check_consistency());
}
