// ChunkStore's insides, shared by chunk_store.cpp (open, reconcile, load, clear, checks)
// and store_writer.cpp (the writer thread: write, insert, evict). Internal to storage/.
//
// Locking: `io_mu` serializes everything that changes the directory or uses the index (one
// writer step, clear(), check_consistency(), and open() before the writer starts); `mu`
// guards the in-memory state below and is held only briefly, never across file I/O except
// load()'s deletion of a damaged file. Order: io_mu before mu.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "storage/chunk_file.h"
#include "storage/chunk_store.h"
#include "storage/index_db.h"

namespace hearth::storage {

// Unix time in microseconds, strictly increasing within the process, so that two chunks
// written or used in a row never tie in LRU order.
int64_t now_stamp_us();

// The chunk files and temp files found under <dir>/chunks (in its two-hex-digit subdirs).
struct ChunkDirScan {
  struct File {
    std::string path;
    uint64_t bytes = 0;
    int64_t mtime_us = 0;
  };
  std::unordered_map<uint64_t, File> chunks;
  std::vector<std::string> temps;
};
ChunkDirScan scan_chunk_dir(const std::filesystem::path& chunks_dir);

class ChunkStore::Impl {
 public:
  StoreOptions options;
  KvFormat format;
  std::string key;  // format_key(format)
  std::shared_ptr<FileOps> ops;
  std::filesystem::path chunks_dir;  // <dir>/chunks
  std::unique_ptr<IndexDb> db;       // under io_mu
  bool memory_index = false;         // the directory could not hold an index

  std::mutex io_mu;
  mutable std::mutex mu;
  std::condition_variable wake;  // the writer has something to do
  std::condition_variable idle;  // the writer finished a step

  // Under mu.
  struct Known {
    uint64_t generation = 0;  // changes each time the hash is (re)indexed
    uint64_t bytes = 0;
    uint32_t owner = 0;
  };
  std::unordered_map<uint64_t, Known> known;  // this format's indexed chunks
  // Other formats' (models') chunks counted in st: those indexed when this store opened.
  // Chunks other stores write later are not counted; evicting or clearing one leaves st be.
  std::unordered_map<uint64_t, uint64_t> others;  // hash -> bytes
  uint64_t next_generation = 1;
  std::deque<ChunkWrite> queue;
  std::unordered_set<uint64_t> queued;               // hashes in `queue` or being written
  std::unordered_map<uint64_t, IndexTouch> touches;  // hits not yet in the index
  std::vector<uint64_t> row_deletes;                 // rows of chunks load() found gone or bad
  bool in_flight = false;
  // The chunk the writer has taken from the queue: whose it is, and whether a clear()
  // that ran meanwhile dropped it (the writer then does not write it).
  uint32_t in_flight_owner = 0;
  bool in_flight_dropped = false;
  bool closing = false;  // enqueue() refused from now on
  bool stop = false;     // the writer exits when idle
  bool closed = false;
  uint64_t steps = 0;  // writer steps done (close() waits while this moves)
  // Writing stopped for a full disk: the writer probes for space again at next_space_check.
  bool stopped_full = false;
  std::chrono::steady_clock::time_point next_space_check;
  StoreStats st;  // totals and counters (queue_depth unused)
  std::thread writer;

  std::string path_of(uint64_t hash) const { return (chunks_dir / chunk_relative_path(hash)).string(); }

  // Under mu: index a chunk of this format / forget it (keeping the totals right).
  void add_known_locked(uint64_t hash, uint64_t bytes, uint32_t owner);
  bool erase_known_locked(uint64_t hash);
  // Under mu: count another format's chunk / uncount it (when it was counted).
  void add_other_locked(uint64_t hash, uint64_t bytes);
  void erase_other_locked(uint64_t hash);

  // store_check.cpp; io_mu held, writer not running (reconcile) or between steps (check).
  void reconcile();
  Status check();

  // Writer side (store_writer.cpp); io_mu held.
  void writer_loop();
  void apply_pending();
  void write_chunk(ChunkWrite& chunk);
  // Under io_mu: the stats' totals (entries, bytes) from the index: the directory's, other
  // models' chunks included. Unchanged when the index cannot answer (the counts serve).
  void refresh_totals();
  void evict_to_budget();
  // One eviction decision: whose chunks go (nullopt: anyone's, by LRU) and how many bytes;
  // 0 bytes when the directory is within its budget and every user within the quota.
  struct EvictionTarget {
    std::optional<uint32_t> owner;
    uint64_t bytes = 0;
  };
  EvictionTarget eviction_target();
  // Deletes victims (files, then rows) until `bytes` are freed; false when none could be.
  bool evict(const std::vector<IndexRow>& victims, uint64_t bytes);
  // full: the disk (or quota) is full, so writing may resume once space is back.
  void stop_writing(const std::string& reason, bool full);
  // io_mu held, writing stopped for a full disk: a probe write; when it succeeds, writing
  // resumes. Under mu: waits for the writer's next work, or until the next space check
  // (true: it is time to probe).
  void try_resume();
  bool wait_for_work(std::unique_lock<std::mutex>& lk);
  bool ensure_dir(const std::filesystem::path& dir, bool fsync_parent);
  bool fsync_dir(const std::filesystem::path& dir);
};

}  // namespace hearth::storage
