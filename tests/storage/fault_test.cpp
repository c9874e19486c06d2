// SQLite-style fault injection: fail the Nth write, fsync, rename, create or mkdir of a
// run of chunk writes, for N = 1, 2, 3, ... until the run no longer reaches the Nth call.
// Each time the failure must be reported, the other chunks written, and a reopened store
// consistent: every indexed chunk loads, every file is indexed.
#include <poll.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <random>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

// Two chains sharing nothing, five chunks, spread over several fan-out directories.
std::vector<ChunkWrite> workload(const KvFormat& f) {
  return {make_chunk(0x1000000000000001ull, 0, f), make_chunk(0x2000000000000002ull, 0x1000000000000001ull, f),
          make_chunk(0x3000000000000003ull, 0x2000000000000002ull, f), make_chunk(0x1000000000000004ull, 0, f),
          make_chunk(0x4000000000000005ull, 0x1000000000000004ull, f, 5)};
}

// Reopens without faults and checks consistency; returns how many chunks load intact.
size_t reopen_and_count(const fs::path& dir, const KvFormat& f) {
  auto s = open_store(dir, f);
  REQUIRE(s);
  const hearth::Status check = s->check_consistency();
  INFO((check ? std::string("consistent") : check.error().message));
  REQUIRE(check);
  size_t loaded = 0;
  for (const ChunkWrite& c : workload(f)) {
    const bool present = s->contains(c.hash);
    auto got = s->load(c.hash, c.tokens);
    CHECK(present == got.has_value());
    if (got) {
      CHECK(*got == c.payload);
      ++loaded;
    }
  }
  CHECK(s->stats().checksum_failures == 0);
  CHECK(chunk_dir_bytes(dir) == s->stats().bytes);
  return loaded;
}

void run_faults(FaultyFileOps::Op op, int err) {
  const KvFormat f = small_format();
  const size_t n_chunks = workload(f).size();
  for (int n = 1;; ++n) {
    INFO("op " << op << ", errno " << err << ", failing call " << n);
    TempDir tmp;
    auto ops = std::make_shared<FaultyFileOps>();
    ops->fail_op = op;
    ops->fail_at = n;
    ops->fail_errno = err;
    StoreStats st;
    {
      StderrCapture quiet;
      auto s = open_store(tmp.path(), f, 1 << 30, ops);
      REQUIRE(s);
      for (ChunkWrite& c : workload(f)) s->enqueue(std::move(c));  // refused once writing stopped
      REQUIRE(s->close(kHangGuard) == 0);
      st = s->stats();
    }
    const bool fired = ops->failures > 0;
    const bool stops = err == ENOSPC || err == EROFS;
    if (!fired) {
      CHECK(st.written_chunks == n_chunks);
    } else if (stops) {
      CHECK_FALSE(st.writing);
      CHECK(st.write_errors == 0);
      CHECK(st.written_chunks + st.dropped_writes + 1 == n_chunks);
    } else {
      CHECK(st.writing);
      CHECK(st.write_errors == 1);
      CHECK(st.written_chunks == n_chunks - 1);
    }
    CHECK(reopen_and_count(tmp.path(), f) == st.written_chunks);
    if (!fired) break;
    REQUIRE(n < 200);
  }
}

}  // namespace

TEST_CASE("prompt cache: a failed write, fsync, rename, create or mkdir loses one chunk and nothing else",
          "[storage][fault]") {
  SECTION("write EIO") {
    run_faults(FaultyFileOps::kWrite, EIO);
  }
  SECTION("fsync EIO") {
    run_faults(FaultyFileOps::kFsync, EIO);
  }
  SECTION("rename EIO") {
    run_faults(FaultyFileOps::kRename, EIO);
  }
  SECTION("create EMFILE") {
    run_faults(FaultyFileOps::kCreate, EMFILE);
  }
  SECTION("mkdir EIO") {
    run_faults(FaultyFileOps::kMkdir, EIO);
  }
}

TEST_CASE("prompt cache: a full disk or read-only file system at any write stops writing consistently",
          "[storage][fault]") {
  SECTION("write ENOSPC") {
    run_faults(FaultyFileOps::kWrite, ENOSPC);
  }
  SECTION("fsync ENOSPC") {
    run_faults(FaultyFileOps::kFsync, ENOSPC);
  }
  SECTION("rename EROFS") {
    run_faults(FaultyFileOps::kRename, EROFS);
  }
  SECTION("create EROFS") {
    run_faults(FaultyFileOps::kCreate, EROFS);
  }
}

TEST_CASE("prompt cache: read errors on the load path are misses and keep the chunk", "[storage][fault]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const ChunkWrite a = make_chunk(0x77, 0, f);
  auto ops = std::make_shared<FaultyFileOps>();
  auto s = open_store(tmp.path(), f, 1 << 30, ops);
  REQUIRE(s);
  REQUIRE(s->enqueue(a));
  REQUIRE(wait_idle(*s));
  for (int n = 1; n <= 3; ++n) {  // the header read, the payload read, then none
    ops->fail_op = FaultyFileOps::kPread;
    ops->calls[FaultyFileOps::kPread] = 0;
    ops->fail_at = n;
    auto got = s->load(a.hash, a.tokens);
    if (n <= 2) {
      CHECK_FALSE(got);
      CHECK(s->contains(a.hash));
    } else {
      REQUIRE(got);
      CHECK(*got == a.payload);
    }
  }
  CHECK(s->stats().checksum_failures == 0);
  CHECK(s->stats().misses == 2);
  // A failing unlink while evicting or deleting a damaged chunk does not corrupt anything.
  ops->fail_op = FaultyFileOps::kUnlink;
  ops->fail_at = 1;
  ops->calls[FaultyFileOps::kUnlink] = 0;
  std::vector<int32_t> other = a.tokens;
  other[0] ^= 1;
  CHECK_FALSE(s->load(a.hash, other));
  s.reset();
  auto again = open_store(tmp.path(), f);
  REQUIRE(again);
  REQUIRE(again->check_consistency());
}

TEST_CASE("prompt cache: a writer killed with SIGKILL at any moment leaves a consistent cache", "[storage][fault]") {
  TempDir tmp;
  const KvFormat f = small_format();
  const uint64_t budget = 24 * file_bytes_of(f);  // small enough that evictions get killed too
  std::mt19937 rng(7);
  uint64_t max_entries = 0;
  for (int round = 0; round < 8; ++round) {
    INFO("round " << round);
    // No store is open here, so the test process has one thread and fork() is safe.
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(ready[0]);
      auto s = open_store(tmp.path(), f, budget);
      if (!s) ::_exit(2);
      const char one = 1;
      if (::write(ready[1], &one, 1) != 1) ::_exit(3);  // open() is done: kill from now on
      uint64_t parent = 0;
      bool told_written = false;
      for (uint64_t i = 1;; ++i) {
        const uint64_t h = (uint64_t(round + 1) << 32) | i;
        while (!s->enqueue(make_chunk(h, parent, f))) std::this_thread::sleep_for(std::chrono::microseconds(200));
        parent = i % 5 == 0 ? 0 : h;
        if (!told_written && s->stats().written_chunks > 0) {  // a row is in the index
          told_written = true;
          if (::write(ready[1], &one, 1) != 1) ::_exit(4);
        }
      }
    }
    ::close(ready[1]);
    char byte = 0;
    const bool opened = ::read(ready[0], &byte, 1) == 1;
    // In the first round the kill waits for the first written chunk, so that however slowly
    // the child writes, the check at the end sees chunks that survived a kill; the other
    // rounds kill at a random moment, wherever the writer is.
    if (round == 0 && opened) {
      pollfd p{ready[0], POLLIN, 0};
      const bool written = ::poll(&p, 1, static_cast<int>(kHangGuard.count())) == 1 && ::read(ready[0], &byte, 1) == 1;
      INFO("hang guard: the child wrote no chunk within " << kHangGuard.count() / 1000 << " s");
      CHECK(written);
    }
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(opened);
    REQUIRE(WIFSIGNALED(status));

    auto s = open_store(tmp.path(), f, budget);
    REQUIRE(s);
    const hearth::Status check = s->check_consistency();
    INFO((check ? std::string("consistent") : check.error().message));
    REQUIRE(check);
    const StoreStats st = s->stats();
    CHECK(st.bytes <= budget);
    max_entries = std::max<uint64_t>(max_entries, st.entries);
    // Every chunk the index names loads back exactly as it was written.
    size_t loaded = 0;
    for (int r = 0; r <= round; ++r) {
      for (uint64_t i = 1; i < 5000; ++i) {
        const uint64_t h = (uint64_t(r + 1) << 32) | i;
        if (!s->contains(h)) continue;
        const ChunkWrite c = make_chunk(h, 0, f);
        auto got = s->load(h, c.tokens);
        REQUIRE(got);
        CHECK(*got == c.payload);
        ++loaded;
      }
    }
    CHECK(loaded == st.model_entries);
    CHECK(s->stats().checksum_failures == 0);
  }
  CHECK(max_entries > 0);  // the children did get chunks written before they died
}
