// open() reconciles the index with the files: after a crash, a user deleting files, or a
// damaged sqlite file, the store is consistent again and keeps what is still valid.
#include <catch2/catch.hpp>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

void write_chunks(const fs::path& dir, const KvFormat& f, std::initializer_list<uint64_t> hashes) {
  auto s = open_store(dir, f);
  REQUIRE(s);
  uint64_t parent = 0;
  for (uint64_t h : hashes) {
    REQUIRE(s->enqueue(make_chunk(h, parent, f)));
    parent = h;
  }
  REQUIRE(s->close(kHangGuard) == 0);
}

}  // namespace

TEST_CASE("prompt cache: a chunk file deleted behind the store's back loses its row on reopen", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {1, 2, 3});
  {
    auto s = open_store(tmp.path(), f);
    REQUIRE(s);
    fs::remove(chunk_path(tmp.path(), 2));
    const auto check = s->check_consistency();  // the checker itself notices
    REQUIRE_FALSE(check);
    CHECK(check.error().message.find("row without file") != std::string::npos);
  }
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK(s->contains(1));
  CHECK_FALSE(s->contains(2));
  CHECK(s->contains(3));
  CHECK(s->stats().entries == 2);
  REQUIRE(s->check_consistency());
  CHECK(s->load(3, chunk_tokens(3, 16)));
}

TEST_CASE("prompt cache: a valid chunk file without a row is re-indexed, a bad one is deleted", "[storage]") {
  TempDir a, b;
  const KvFormat f = small_format();
  write_chunks(a.path(), f, {0x51, 0x52});
  write_chunks(b.path(), f, {0x61});
  // As if killed between the rename and the row insert: the files are there, rows are not.
  fs::create_directories(fs::path(chunk_path(b.path(), 0x51)).parent_path());
  fs::copy_file(chunk_path(a.path(), 0x51), chunk_path(b.path(), 0x51));
  fs::create_directories(fs::path(chunk_path(b.path(), 0x52)).parent_path());
  auto damaged = read_bytes(chunk_path(a.path(), 0x52));
  damaged.back() ^= 0xff;
  write_bytes(chunk_path(b.path(), 0x52), damaged);
  // A file named like a chunk whose header names another hash.
  fs::create_directories(fs::path(chunk_path(b.path(), 0x53)).parent_path());
  fs::copy_file(chunk_path(a.path(), 0x51), chunk_path(b.path(), 0x53));

  auto s = open_store(b.path(), f);
  REQUIRE(s);
  CHECK(s->contains(0x61));
  CHECK(s->contains(0x51));
  CHECK_FALSE(s->contains(0x52));
  CHECK_FALSE(s->contains(0x53));
  CHECK_FALSE(fs::exists(chunk_path(b.path(), 0x52)));
  CHECK_FALSE(fs::exists(chunk_path(b.path(), 0x53)));
  auto got = s->load(0x51, chunk_tokens(0x51, 16));
  REQUIRE(got);
  CHECK(*got == make_chunk(0x51, 0, f).payload);
  CHECK(s->stats().entries == 2);
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: temp files of interrupted writes are removed on open", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {0xab00000000000001ull});
  const fs::path sub = fs::path(chunk_path(tmp.path(), 0xab00000000000001ull)).parent_path();
  const fs::path temp = sub / temp_file_name(0xab00000000000002ull);
  write_bytes(temp.string(), std::vector<uint8_t>(500, 7));
  const fs::path stranger = sub / "README";  // not ours: left alone
  write_bytes(stranger.string(), {1});
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK_FALSE(fs::exists(temp));
  CHECK(fs::exists(stranger));
  CHECK(s->contains(0xab00000000000001ull));
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: a garbage index is rebuilt and the chunks on disk are indexed again", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {1, 2, 3});
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(tmp.path() / (std::string("index.sqlite") + suffix));
  std::vector<uint8_t> garbage(8192);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131 + 17);
  write_bytes((tmp.path() / "index.sqlite").string(), garbage);

  StderrCapture capture;
  auto s = open_store(tmp.path(), f);
  const std::string log = capture.text();
  REQUIRE(s);
  INFO(log);
  CHECK(StderrCapture::count(log, "rebuilt") == 1);
  CHECK(s->stats().entries == 3);
  CHECK(s->load(2, chunk_tokens(2, 16)));
  REQUIRE(s->enqueue(make_chunk(4, 3, f)));
  REQUIRE(wait_idle(*s));
  CHECK(s->load(4, chunk_tokens(4, 16)));
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: a sqlite file whose pages are damaged is rebuilt", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {1, 2});
  const std::string db = (tmp.path() / "index.sqlite").string();
  auto bytes = read_bytes(db);
  REQUIRE(bytes.size() > 4096);
  for (size_t i = 4096 + 8; i < bytes.size(); i += 3) bytes[i] ^= 0x5a;  // every page after the first
  write_bytes(db, bytes);
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK(s->contains(1));
  CHECK(s->contains(2));
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: an index that cannot be opened at all serves the chunks from memory", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {1, 2});
  for (const char* name : {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm"}) fs::remove(tmp.path() / name);
  fs::create_directory(tmp.path() / "index.sqlite");  // neither openable nor removable by unlink()

  StderrCapture capture;
  auto s = open_store(tmp.path(), f);
  REQUIRE(s);
  CHECK(s->contains(1));
  CHECK(s->contains(2));
  auto got = s->load(2, chunk_tokens(2, 16));
  REQUIRE(got);
  CHECK(*got == make_chunk(2, 1, f).payload);
  CHECK_FALSE(s->enqueue(make_chunk(3, 2, f)));
  const StoreStats st = s->stats();
  CHECK_FALSE(st.writing);
  CHECK_FALSE(st.stopped_reason.empty());
  CHECK(st.entries == 2);
  REQUIRE(s->check_consistency());
  s.reset();
  const std::string log = capture.text();
  INFO(log);
  CHECK(StderrCapture::count(log, "read-only") == 1);
  CHECK(fs::exists(chunk_path(tmp.path(), 1)));  // nothing on disk was touched
}

TEST_CASE(
    "prompt cache: a store opened without reconcile beside another leaves its temp files and rows alone, and "
    "finds its own chunks",
    "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  write_chunks(tmp.path(), f, {0xab00000000000001ull});
  // Another model's store is writing: its temp file must stay.
  auto other = open_store(tmp.path(), f);
  REQUIRE(other);
  const fs::path sub = fs::path(chunk_path(tmp.path(), 0xab00000000000001ull)).parent_path();
  const fs::path temp = sub / temp_file_name(0xab00000000000002ull);
  write_bytes(temp.string(), std::vector<uint8_t>(500, 7));
  StoreOptions o;
  o.dir = tmp.path();
  o.reconcile = false;
  auto s = ChunkStore::open(o, f);
  REQUIRE(s.ok());
  CHECK(fs::exists(temp));
  CHECK((*s)->contains(0xab00000000000001ull));
  CHECK((*s)->load(0xab00000000000001ull, chunk_tokens(0xab00000000000001ull, 16)));
  CHECK((*s)->stats().entries == 1);
}
