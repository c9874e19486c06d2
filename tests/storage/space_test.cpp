// A full disk stops the writer; once space is back, writing resumes by itself (issue 47,
// item 6). A read-only directory stays stopped.
#include <catch2/catch.hpp>
#include <thread>

#include "common/log.h"
#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

// Every write fails with `err` while `refusing` is set.
class RefusingDisk : public FileOps {
 public:
  explicit RefusingDisk(int err) : err_(err) {}
  std::atomic<bool> refusing{true};
  ssize_t write(int fd, const void* data, size_t n) override {
    if (refusing) {
      errno = err_;
      return -1;
    }
    return FileOps::write(fd, data, n);
  }

 private:
  int err_;
};

std::unique_ptr<ChunkStore> open_rechecking(const fs::path& dir, const KvFormat& f, std::shared_ptr<FileOps> ops) {
  StoreOptions o;
  o.dir = dir;
  o.file_ops = std::move(ops);
  o.space_recheck = std::chrono::milliseconds(20);
  auto s = ChunkStore::open(o, f);
  return s ? std::move(*s) : nullptr;
}

}  // namespace

TEST_CASE("prompt cache: after a full disk, writing resumes by itself once space is back", "[storage][fault]") {
  TempDir tmp;
  const KvFormat f = small_format();
  auto disk = std::make_shared<RefusingDisk>(ENOSPC);
  const hearth::LogLevel level = hearth::log_level();
  hearth::set_log_level(hearth::LogLevel::Info);  // the line saying writing resumed is info
  StderrCapture log;
  auto s = open_rechecking(tmp.path(), f, disk);
  REQUIRE(s);
  REQUIRE(s->enqueue(make_chunk(1, 0, f)));
  REQUIRE(eventually([&] { return !s->stats().writing; }));
  CHECK_THAT(s->stats().stopped_reason, Catch::Contains("No space"));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // several probes, all refused
  CHECK_FALSE(s->stats().writing);
  CHECK_FALSE(s->enqueue(make_chunk(2, 0, f)));

  disk->refusing = false;
  REQUIRE(eventually([&] { return s->stats().writing; }));
  CHECK(s->stats().stopped_reason.empty());
  REQUIRE(s->enqueue(make_chunk(2, 0, f)));
  REQUIRE(wait_idle(*s));
  CHECK(s->load(2, chunk_tokens(2, 16)));
  CHECK_FALSE(s->contains(1));      // the chunk the full disk refused is gone, not half there
  REQUIRE(s->check_consistency());  // no probe file left behind
  const std::string text = log.text();
  CHECK_THAT(text, Catch::Contains("stopped writing"));
  CHECK_THAT(text, Catch::Contains("space is back"));
  hearth::set_log_level(level);
}

TEST_CASE("prompt cache: a read-only directory stays stopped", "[storage][fault]") {
  TempDir tmp;
  const KvFormat f = small_format();
  auto disk = std::make_shared<RefusingDisk>(EROFS);
  StderrCapture quiet;
  auto s = open_rechecking(tmp.path(), f, disk);
  REQUIRE(s);
  REQUIRE(s->enqueue(make_chunk(1, 0, f)));
  REQUIRE(eventually([&] { return !s->stats().writing; }));
  disk->refusing = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK_FALSE(s->stats().writing);
}
