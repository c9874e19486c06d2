// Fair shares of the disk tier between users: one user filling the cache evicts their own
// chunks, not another user's; a quota holds whatever the total.
#include <catch2/catch.hpp>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

ChunkWrite owned_chunk(uint64_t hash, uint32_t owner, const KvFormat& f) {
  ChunkWrite c = make_chunk(hash, 0, f);
  c.owner = owner;
  return c;
}

std::unique_ptr<ChunkStore> open_shared(const fs::path& dir, const KvFormat& f, uint64_t max_bytes,
                                        uint64_t user_max_bytes) {
  StoreOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.user_max_bytes = user_max_bytes;
  auto s = ChunkStore::open(o, f);
  return s ? std::move(*s) : nullptr;
}

}  // namespace

TEST_CASE("prompt cache: a user flooding the disk tier evicts their own chunks, not another's", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const uint64_t one = file_bytes_of(f);
  auto s = open_shared(tmp.path(), f, 10 * one, 0);
  REQUIRE(s);
  // User 1001 warms three prefixes, then user 1002 writes forty chunks, each newer than them.
  for (uint64_t h = 1; h <= 3; ++h) REQUIRE(s->enqueue(owned_chunk(h, 1001, f)));
  REQUIRE(wait_idle(*s));
  for (uint64_t h = 100; h < 140; ++h) {
    REQUIRE(s->enqueue(owned_chunk(h, 1002, f)));
    REQUIRE(wait_idle(*s));
  }
  for (uint64_t h = 1; h <= 3; ++h) CHECK(s->contains(h));  // under LRU alone they would be gone
  const StoreStats st = s->stats();
  CHECK(st.bytes <= 10 * one);
  CHECK(st.share_bytes == 5 * one);  // two users with chunks
  CHECK(st.directory_owner_bytes.at(1001) == 3 * one);
  CHECK(st.directory_owner_bytes.at(1002) == 7 * one);
  CHECK(s->contains(139));
  CHECK_FALSE(s->contains(132));  // the flooder's oldest went
  REQUIRE(s->check_consistency());

  // The other user writing more takes room back from the one over the share.
  for (uint64_t h = 4; h <= 6; ++h) {
    REQUIRE(s->enqueue(owned_chunk(h, 1001, f)));
    REQUIRE(wait_idle(*s));
  }
  CHECK(s->stats().directory_owner_bytes.at(1001) == 5 * one);
  CHECK(s->stats().directory_owner_bytes.at(1002) == 5 * one);
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: plain LRU decides within the shares, and a user alone has the whole budget", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const uint64_t one = file_bytes_of(f);
  auto s = open_shared(tmp.path(), f, 4 * one, 0);
  REQUIRE(s);
  for (uint64_t h = 1; h <= 6; ++h) {
    REQUIRE(s->enqueue(owned_chunk(h, 7, f)));
    REQUIRE(wait_idle(*s));
  }
  CHECK(s->stats().share_bytes == 4 * one);
  CHECK_FALSE(s->contains(2));
  CHECK(s->contains(3));
  CHECK(s->stats().entries == 4);
}

TEST_CASE("prompt cache: a user's quota holds below the budget, across restarts", "[storage]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const uint64_t one = file_bytes_of(f);
  {
    auto s = open_shared(tmp.path(), f, 100 * one, 3 * one);
    REQUIRE(s);
    for (uint64_t h = 1; h <= 8; ++h) {
      REQUIRE(s->enqueue(owned_chunk(h, 42, f)));
      REQUIRE(wait_idle(*s));
    }
    REQUIRE(s->enqueue(owned_chunk(50, 43, f)));
    REQUIRE(wait_idle(*s));
    const StoreStats st = s->stats();
    CHECK(st.user_max_bytes == 3 * one);
    CHECK(st.directory_owner_bytes.at(42) == 3 * one);
    CHECK(st.directory_owner_bytes.at(43) == one);
    CHECK(s->contains(8));
    CHECK_FALSE(s->contains(5));
  }
  // A smaller quota at the next start applies at once (open evicts).
  auto s = open_shared(tmp.path(), f, 100 * one, 2 * one);
  REQUIRE(s);
  CHECK(s->stats().directory_owner_bytes.at(42) == 2 * one);
  CHECK(s->contains(8));
  CHECK_FALSE(s->contains(6));
  REQUIRE(s->check_consistency());
}
