// Reading a restore's chunk files beside the engine: a RestoreReader's threads read and
// verify the chunks of a PendingRestore in parallel (ChunkStore::load), while the engine
// thread keeps stepping the other sequences; after each chunk the reader calls back, and
// the engine thread copies the payloads read so far into KV blocks, in chain order
// (PrefixCache::advance_restore). Several files in flight at once also read faster than
// one after another: the disk serves them with its own parallelism.
//
// Thread-safety: start() from any thread; a PendingRestore's loads belong to the reader
// until ready(), to the engine thread after.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "storage/chunk_store.h"

namespace hearth {

struct ChunkLoad {
  uint64_t name = 0;
  std::vector<int32_t> tokens;  // the chunk's token ids, as the prompt has them
  storage::Sections sections = storage::Sections::kAll;
  std::optional<std::vector<uint8_t>> payload;  // set by the reader: nullopt when missing or invalid
};

// What one sequence's restore reads, and where the engine thread has got to.
struct PendingRestore {
  std::vector<ChunkLoad> loads;  // the chain's chunks in order, then the tail chunk when has_tail
  bool has_tail = false;
  int32_t first_block = 0;  // blocks [0, first_block) were attached from memory at admission
  int32_t reach = 0;        // the blocks memory and disk held together at admission

  // The engine thread's walk along the chain (PrefixCache::advance_restore).
  int32_t next_block = 0;  // the table holds blocks [0, next_block)
  size_t next_load = 0;    // loads before it are used or passed over
  bool walking = true;
  bool inline_reads = false;  // no reader: advance_restore reads each chunk when it needs it
  // advance_restore stopped because what comes next is not read yet (not for its deadline):
  // nothing to do for this restore until the reader's next wake-up.
  bool waits_for_read = false;
  std::vector<bool> from_disk;  // per block in the table

  // Set by the reader (or inline): load i is read and may be used.
  bool done(size_t i) const { return done_[i].load(std::memory_order_acquire); }
  bool ready() const { return left_.load(std::memory_order_acquire) == 0; }
  void set_done(size_t i) {
    done_[i].store(true, std::memory_order_release);
    left_.fetch_sub(1, std::memory_order_acq_rel);
  }
  // Before any load is read.
  void expect_loads() {
    done_ = std::make_unique<std::atomic<bool>[]>(loads.size());
    left_.store(loads.size(), std::memory_order_release);
  }

 private:
  std::unique_ptr<std::atomic<bool>[]> done_;
  std::atomic<size_t> left_{0};
};

class RestoreReader {
 public:
  // n_threads >= 1. on_ready runs on a reader thread after each load (the engine thread
  // places chunks as they arrive, in chain order).
  RestoreReader(storage::ChunkStore& store, int n_threads, std::function<void()> on_ready);
  // Finishes the loads in flight, then joins the threads.
  ~RestoreReader();
  RestoreReader(const RestoreReader&) = delete;
  RestoreReader& operator=(const RestoreReader&) = delete;

  // Reads every load of p (scope: the chain's root, as ChunkStore::load expects).
  void start(std::shared_ptr<PendingRestore> p, uint64_t scope);

 private:
  struct Job {
    std::shared_ptr<PendingRestore> restore;
    size_t index;
    uint64_t scope;
  };
  static constexpr size_t kPrefetch = SIZE_MAX;  // Job::index of a restore's first job
  void run();
  void prefetch_then_queue(const Job& job);

  storage::ChunkStore& store_;
  std::function<void()> on_ready_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hearth
