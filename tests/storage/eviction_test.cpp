// The byte budget: least recently used first, leaves of the prefix tree before their
// parents, across every model sharing the directory.
#include <catch2/catch.hpp>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

TEST_CASE("prompt cache: the directory stays within the budget", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const uint64_t one = file_bytes_of(f);
  auto s = open_store(tmp.path(), f, 5 * one);
  REQUIRE(s);
  uint64_t parent = 0;
  for (uint64_t h = 1; h <= 20; ++h) {
    REQUIRE(s->enqueue(make_chunk(h, h % 4 == 1 ? 0 : parent, f)));
    parent = h;
  }
  REQUIRE(wait_idle(*s));
  const StoreStats st = s->stats();
  CHECK(st.bytes <= 5 * one);
  CHECK(st.entries == 5);
  CHECK(st.evictions == 15);
  CHECK(chunk_dir_bytes(tmp.path()) <= 5 * one);
  CHECK(chunk_dir_bytes(tmp.path()) == st.bytes);
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: the least recently used chunk goes first, a recently loaded one stays", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  auto s = open_store(tmp.path(), f, 3 * file_bytes_of(f));
  REQUIRE(s);
  for (uint64_t h : {1, 2, 3}) {
    REQUIRE(s->enqueue(make_chunk(h, 0, f)));
    REQUIRE(wait_idle(*s));
  }
  REQUIRE(s->load(1, chunk_tokens(1, 16)));  // 1 is now the most recently used
  REQUIRE(s->enqueue(make_chunk(4, 0, f)));
  REQUIRE(wait_idle(*s));
  CHECK(s->contains(1));
  CHECK_FALSE(s->contains(2));
  CHECK(s->contains(3));
  CHECK(s->contains(4));
  CHECK(s->stats().evictions == 1);
  REQUIRE(s->check_consistency());

  // The order survives a restart (the touch reached the index).
  s.reset();
  s = open_store(tmp.path(), f, 3 * file_bytes_of(f));
  REQUIRE(s);
  REQUIRE(s->enqueue(make_chunk(5, 0, f)));
  REQUIRE(wait_idle(*s));
  CHECK(s->contains(1));
  CHECK_FALSE(s->contains(3));
}

TEST_CASE("prompt cache: a parent is not evicted before its child", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  auto s = open_store(tmp.path(), f, 2 * file_bytes_of(f));
  REQUIRE(s);
  REQUIRE(s->enqueue(make_chunk(10, 0, f)));  // oldest, but a parent
  REQUIRE(wait_idle(*s));
  REQUIRE(s->enqueue(make_chunk(11, 10, f)));  // its child, a leaf
  REQUIRE(wait_idle(*s));
  REQUIRE(s->enqueue(make_chunk(20, 0, f)));
  REQUIRE(wait_idle(*s));
  CHECK(s->contains(10));
  CHECK_FALSE(s->contains(11));
  CHECK(s->contains(20));
  // Now 10 is a leaf again and the least recently used.
  REQUIRE(s->enqueue(make_chunk(30, 0, f)));
  REQUIRE(wait_idle(*s));
  CHECK_FALSE(s->contains(10));
  CHECK(s->contains(20));
  CHECK(s->contains(30));
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: the budget covers every model in the directory", "[storage]") {
  TempDir tmp;
  const KvFormat fa = small_format(kFingerprintA);
  const KvFormat fb = small_format(kFingerprintB);
  const uint64_t one = file_bytes_of(fa);
  {
    auto a = open_store(tmp.path(), fa, 10 * one);
    REQUIRE(a);
    for (uint64_t h = 1; h <= 3; ++h) REQUIRE(a->enqueue(make_chunk(h, 0, fa)));
    a->close(kHangGuard);
  }
  auto b = open_store(tmp.path(), fb, 4 * one);
  REQUIRE(b);
  CHECK(b->stats().entries == 3);
  CHECK(b->stats().model_entries == 0);
  for (uint64_t h = 101; h <= 103; ++h) {
    REQUIRE(b->enqueue(make_chunk(h, 0, fb)));
    REQUIRE(wait_idle(*b));
  }
  StoreStats st = b->stats();
  CHECK(st.entries == 4);
  CHECK(st.model_entries == 3);
  CHECK(st.bytes <= 4 * one);
  REQUIRE(b->check_consistency());
  b.reset();
  // Opening with a smaller budget evicts at once.
  auto a = open_store(tmp.path(), fa, 2 * one);
  REQUIRE(a);
  CHECK(a->stats().entries == 2);
  CHECK(chunk_dir_bytes(tmp.path()) <= 2 * one);
  REQUIRE(a->check_consistency());
}

TEST_CASE("prompt cache: two models' stores open at once keep the directory within the one budget", "[storage]") {
  // A daemon serving several models opens a store per model on one directory; each writes
  // chunks the other's counts never saw. The budget holds for the directory all the same.
  TempDir tmp;
  const KvFormat fa = small_format(kFingerprintA);
  const KvFormat fb = small_format(kFingerprintB);
  const uint64_t one = file_bytes_of(fa);
  auto a = open_store(tmp.path(), fa, 4 * one);
  REQUIRE(a);
  StoreOptions o;
  o.dir = tmp.path();
  o.max_bytes = 4 * one;
  o.reconcile = false;  // as the daemon opens every store but the first
  auto opened = ChunkStore::open(o, fb);
  REQUIRE(opened.ok());
  std::unique_ptr<ChunkStore> b = std::move(*opened);
  for (uint64_t h = 1; h <= 3; ++h) REQUIRE(a->enqueue(make_chunk(h, 0, fa)));
  REQUIRE(wait_idle(*a));
  for (uint64_t h = 101; h <= 103; ++h) {
    REQUIRE(b->enqueue(make_chunk(h, 0, fb)));
    REQUIRE(wait_idle(*b));
    CHECK(chunk_dir_bytes(tmp.path()) <= 4 * one);
  }
  // The oldest (a's) went; b's three are there, and b's stats count the directory.
  CHECK(chunk_dir_bytes(tmp.path()) == 4 * one);
  for (uint64_t h = 101; h <= 103; ++h) CHECK(b->contains(h));
  CHECK(b->stats().entries == 4);
  CHECK(b->stats().bytes == 4 * one);
  // a writes again: b's oldest goes now, and neither store's counts went wrong.
  for (uint64_t h = 4; h <= 5; ++h) {
    REQUIRE(a->enqueue(make_chunk(h, 0, fa)));
    REQUIRE(wait_idle(*a));
  }
  CHECK(chunk_dir_bytes(tmp.path()) <= 4 * one);
  CHECK(a->stats().bytes <= 4 * one);
  CHECK(b->stats().bytes <= 4 * one);
  CHECK(a->stats().evictions + b->stats().evictions == 4);
  // a's chunks b evicted are misses for a, not errors.
  CHECK_FALSE(a->load(1, chunk_tokens(1, 16)));
  CHECK(a->load(5, chunk_tokens(5, 16)));
}
