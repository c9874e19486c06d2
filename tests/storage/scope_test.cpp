// The cache scope at rest: chunk files and index rows record the chain's scope and its
// owner, a load from another scope is a miss that leaves the chunk alone, clearing by owner
// leaves the others' chunks, and files of an older chunk format are deleted at open rather
// than misread.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "storage/chunk_file.h"
#include "store_test_util.h"

namespace {

using namespace hearth::storage;
using namespace hearth::storage::test;

ChunkWrite scoped_chunk(uint64_t hash, const KvFormat& f, uint64_t scope, uint32_t owner) {
  ChunkWrite c = make_chunk(hash, 0, f);
  c.scope = scope;
  c.owner = owner;
  return c;
}

}  // namespace

TEST_CASE("A chunk is served only to its own scope, and its owner survives a reopen", "[storage][scope]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const ChunkWrite a = scoped_chunk(0x1111, f, 0xA0A0, 40001);
  const ChunkWrite b = scoped_chunk(0x2222, f, 0xB0B0, 40002);
  {
    auto s = open_store(tmp.path(), f);
    REQUIRE(s);
    REQUIRE(s->enqueue(a));
    REQUIRE(s->enqueue(b));
    REQUIRE(s->close(kHangGuard) == 0);
  }
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK_FALSE(s->load(a.hash, a.tokens, 0xB0B0));  // another scope: a miss ...
  CHECK(s->contains(a.hash));                      // ... that deletes nothing
  REQUIRE(s->load(a.hash, a.tokens, 0xA0A0));
  const StoreStats st = s->stats();
  REQUIRE(st.owners.size() == 2);
  CHECK(st.owners.at(40001).entries == 1);
  CHECK(st.owners.at(40002).bytes == file_bytes_of(f));
  CHECK(s->check_consistency());

  struct stat fst {};
  REQUIRE(::stat(chunk_path(tmp.path(), a.hash).c_str(), &fst) == 0);
  CHECK((fst.st_mode & 0777) == 0600);
  REQUIRE(::stat((tmp.path() / "index.sqlite").c_str(), &fst) == 0);
  CHECK((fst.st_mode & 0777) == 0600);
}

TEST_CASE("Clearing one owner's chunks leaves every other owner's", "[storage][scope]") {
  TempDir tmp;
  const KvFormat f = small_format();
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  REQUIRE(s->enqueue(scoped_chunk(0x1111, f, 0xA0A0, 40001)));
  REQUIRE(s->enqueue(scoped_chunk(0x2222, f, 0xB0B0, 40002)));
  REQUIRE(wait_idle(*s));
  REQUIRE(s->clear(true, 40002));
  CHECK(s->contains(0x1111));
  CHECK_FALSE(s->contains(0x2222));
  CHECK_FALSE(std::filesystem::exists(chunk_path(tmp.path(), 0x2222)));
  CHECK(s->stats().owners.count(40002) == 0);
  CHECK(s->check_consistency());
}

namespace {

// Writes chunk `a` through a store of format f; returns its file's path.
std::string write_one(const TempDir& tmp, const KvFormat& f, const ChunkWrite& a) {
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  REQUIRE(s->enqueue(a));
  REQUIRE(s->close(kHangGuard) == 0);
  return chunk_path(tmp.path(), a.hash);
}

// `bytes`, an older version's file, replaces chunk a's file and the index goes (an index of
// an older schema loses its rows at open: PRAGMA user_version): opening deletes the file.
void check_deleted_at_open(const TempDir& tmp, const KvFormat& f, const ChunkWrite& a,
                           const std::vector<uint8_t>& bytes) {
  const std::string path = chunk_path(tmp.path(), a.hash);
  write_bytes(path, bytes);
  CHECK_FALSE(decode_chunk_header(bytes).ok());
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(tmp.path() / (std::string("index.sqlite") + suffix));
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK_FALSE(s->contains(a.hash));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(s->stats().entries == 0);
  CHECK(s->check_consistency());
}

}  // namespace

TEST_CASE("Chunk files of an older format version are deleted at open, not misread", "[storage][scope]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const ChunkWrite a = scoped_chunk(0x1111, f, 0xA0A0, 40001);
  // The file as version 2 wrote it: a 128-byte header (no sections: offset 104 is the whole
  // payload's checksum, 120 the header's), then the same token ids and payload.
  const std::vector<uint8_t> now = read_bytes(write_one(tmp, f, a));
  std::vector<uint8_t> bytes(now.begin(), now.begin() + 128);
  bytes.insert(bytes.end(), now.begin() + kChunkHeaderBytes, now.end());
  const uint32_t version = 2, header_bytes = 128;
  std::memcpy(bytes.data() + 8, &version, 4);
  std::memcpy(bytes.data() + 12, &header_bytes, 4);
  const uint64_t payload_sum = checksum64(a.payload.data(), a.payload.size());
  std::memcpy(bytes.data() + 104, &payload_sum, 8);
  const uint64_t sum = checksum64(bytes.data(), 120);
  std::memcpy(bytes.data() + 120, &sum, 8);
  check_deleted_at_open(tmp, f, a, bytes);
}

TEST_CASE("Chunk files of format version 3 (bytes per element at offset 60) are deleted at open", "[storage][scope]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const ChunkWrite a = scoped_chunk(0x2222, f, 0xB0B0, 40002);
  // The same file as version 3 wrote it: the same 144-byte layout, but offset 60 held the
  // bytes of one element (2 for f16) where version 4 holds the bytes of a row.
  std::vector<uint8_t> bytes = read_bytes(write_one(tmp, f, a));
  const uint32_t version = 3, elem_bytes = 2;
  std::memcpy(bytes.data() + 8, &version, 4);
  std::memcpy(bytes.data() + 60, &elem_bytes, 4);
  const uint64_t sum = checksum64(bytes.data(), kChunkHeaderBytes - 8);
  std::memcpy(bytes.data() + kChunkHeaderBytes - 8, &sum, 8);
  check_deleted_at_open(tmp, f, a, bytes);
}
