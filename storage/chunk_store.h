// The prompt cache on disk: one file per chunk of KV (every layer's K and V for a run of
// consecutive tokens), named by the chunk's chain hash, plus one sqlite database (WAL)
// indexing them. The engine hands full chunks to a background writer (bounded queue,
// never blocks a response) and loads chunks back on the engine thread, verified.
//
// Crash safety: a chunk is written to a temp file, fsynced, renamed, then its row is
// inserted. open() reconciles rows without files and files without rows, so a kill -9 at
// any moment leaves a consistent cache. A corrupted, truncated or foreign chunk is
// detected on load, deleted, and reported as a miss: a damaged cache costs time, never
// correctness. A full disk or read-only directory stops writing with one log line; after a
// full disk, writing resumes by itself once space is back (StoreOptions::space_recheck).
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "storage/file_ops.h"

namespace hearth::storage {

// Bumped whenever the chunk file layout or the meaning of a payload changes. open() deletes
// chunk files of any other version (and an index of an older schema is started over), so
// an old file is never misread. 2: the header records the chain's scope and owner.
// 3: the payload has two sections, full-attention layers then sliding-window layers, each
// with its own checksum, so a restore can read the first alone. 4: the header records the
// bytes of a token's K (= V) row per layer instead of bytes per element, so block-quantized
// KV types (Q8_0) have a format too.
inline constexpr uint32_t kChunkFormatVersion = 4;

// Everything a chunk's payload layout depends on. Two stores with different formats never
// see each other's chunks as valid (the hash chain is seeded with the same fields).
struct KvFormat {
  std::string model_fingerprint;  // 32 hex digits, see model_fingerprint()
  uint32_t kv_dtype = 0;          // numeric value of hearth::DType
  uint32_t n_layer = 0;
  uint32_t kv_dim = 0;     // elements per token per layer, for K and for V each
  uint32_t row_bytes = 0;  // bytes of those kv_dim elements in kv_dtype (one K or V row)
  // Of the n_layer layers, how many attend through a sliding window (0 for most models).
  // Their KV is only needed for the last window of a prefix, so it has a section of its own.
  uint32_t n_sliding = 0;
  uint32_t version = kChunkFormatVersion;
  // Canonical payload, two sections: first the full-attention layers, then the sliding
  // ones, each in layer order; within a section layer by layer, K then V, token by token,
  // one row_bytes row each.
  size_t layer_bytes_per_token() const { return size_t{2} * row_bytes; }
  size_t bytes_per_token() const { return size_t{n_layer} * layer_bytes_per_token(); }
  size_t global_bytes_per_token() const { return size_t{n_layer - n_sliding} * layer_bytes_per_token(); }
};

// Which sections of a chunk's payload a load reads.
enum class Sections {
  kAll,
  kGlobal,  // the full-attention layers only (the whole payload when n_sliding is 0)
};

struct ChunkWrite {
  uint64_t hash = 0;
  uint64_t parent = 0;           // hash of the chunk before it; 0 for the first chunk
  uint64_t scope = 0;            // root of the chain (engine/kv/prefix_hash.h scope_root)
  uint32_t owner = 0;            // uid whose request wrote it
  std::vector<int32_t> tokens;   // the chunk's token ids
  std::vector<uint8_t> payload;  // tokens.size() * bytes_per_token(), canonical layout
};

struct PrefetchItem {
  uint64_t hash = 0;
  Sections sections = Sections::kAll;
};

struct StoreOptions {
  std::filesystem::path dir;               // created with mode 0700 when missing
  uint64_t max_bytes = uint64_t{4} << 30;  // budget for chunk files (all models together)
  // Fair shares between users (the uids chunks are written for). With a quota, a user's
  // chunks (all models) never take more than user_max_bytes: past it, that user's least
  // recently used chunks go first, whatever the total. Without one (0), each user's share
  // is the budget divided among the users with chunks; over the budget, a user over that
  // share loses chunks before anyone else does, so one user filling the cache evicts their
  // own prefixes, not the others'. Only when nobody is over their share does plain LRU decide.
  // (The memory pool shares its blocks the same way: engine/kv/block_pool.h.)
  uint64_t user_max_bytes = 0;
  size_t queue_max = 256;  // chunks waiting for the writer; more are dropped
  // The file system calls the store makes for chunk files (not sqlite's own I/O); null means
  // the real POSIX calls. Tests pass a FileOps that fails the Nth write, fsync or rename.
  std::shared_ptr<FileOps> file_ops;
  // Whether open() reconciles the directory with the index (deleting temp files, dropping
  // rows without files, re-indexing files without rows). Only safe when no other store is
  // writing there: a daemon serving several models reconciles when it opens the first.
  bool reconcile = true;
  // After a full disk (or quota) stopped writing: how often the writer tries a probe write
  // of one MiB and, when it succeeds, writes again (one log line each way). A read-only
  // directory or a permission error stays stopped.
  std::chrono::milliseconds space_recheck{30000};
};

struct OwnerTotals {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

struct StoreStats {
  uint64_t entries = 0;        // chunk files indexed (all models)
  uint64_t bytes = 0;          // their size
  uint64_t budget = 0;         // max_bytes
  uint64_t model_entries = 0;  // of this store's model and format
  uint64_t model_bytes = 0;
  uint64_t hits = 0;            // load() that returned a payload
  uint64_t misses = 0;          // load() that did not (absent, vanished or invalid)
  uint64_t restored_bytes = 0;  // payload bytes returned by load()
  uint64_t written_chunks = 0, written_bytes = 0;
  uint64_t evictions = 0;          // chunks deleted to stay under budget
  uint64_t checksum_failures = 0;  // chunks found corrupted, truncated or foreign (deleted)
  uint64_t dropped_writes = 0;     // enqueue() refused: queue full or writing stopped
  uint64_t write_errors = 0;
  size_t queue_depth = 0;
  bool writing = true;                     // false after a full disk / read-only directory
  std::string stopped_reason;              // why writing stopped
  std::map<uint32_t, OwnerTotals> owners;  // this model's chunks by owner uid
  // The fair shares, as of the last eviction pass: each user's share of the directory (the
  // quota, or the budget over the users with chunks), and each user's bytes there (all models).
  uint64_t user_max_bytes = 0;  // the quota; 0 = none, fair shares only
  uint64_t share_bytes = 0;
  std::map<uint32_t, uint64_t> directory_owner_bytes;
};

class ChunkStore {
 public:
  // Opens (creating) the directory and its index, reconciles rows and files, evicts down to
  // the budget and starts the writer thread. A missing or corrupted index is rebuilt.
  // An error only when the directory cannot be created or read at all, or `format` is
  // invalid (fingerprint not 1..32 characters, or zero bytes per token). When the index
  // cannot be written (read-only directory) the store serves what is on disk from an index
  // kept in memory, with writing stopped.
  static Result<std::unique_ptr<ChunkStore>> open(const StoreOptions& options, const KvFormat& format);
  // Calls close(5 s) unless close() was called.
  ~ChunkStore();

  // On disk or queued for writing (an in-memory set; cheap).
  bool contains(uint64_t hash) const;
  // Queues a write; false (counted in dropped_writes) when the queue is full, writing has
  // stopped, or the hash is already present.
  bool enqueue(ChunkWrite chunk);
  // Reads and verifies a chunk: header (magic, version, format, token count, scope equal
  // to `scope`), the checksums of the sections read, and token ids equal to
  // `expected_tokens`. Returns the payload's first section, or all of it (kAll). Anything
  // invalid is deleted (file and row) and nullopt returned; a chunk of another scope is a
  // miss and stays. Marks the chunk used (LRU) without writing to sqlite on the calling thread.
  std::optional<std::vector<uint8_t>> load(uint64_t hash, std::span<const int32_t> expected_tokens, uint64_t scope = 0,
                                           Sections sections = Sections::kAll);
  // Asks the kernel to start reading these chunks' files, or the parts of them that a
  // kGlobal load reads (posix_fadvise WILLNEED), so the load() calls that follow find them
  // in the page cache or already on their way: one request's chain is read with the
  // device's parallelism instead of one file at a time. Unknown hashes are skipped.
  // Advisory: never fails.
  void prefetch(std::span<const PrefetchItem> items);
  // Writes everything queued, however long that takes while the writer makes progress; gives
  // up on the rest only when the writer has finished no step for `timeout` (a hung disk).
  // Returns the chunks left unwritten, then stops the writer. Later enqueue() calls are refused.
  // (An answer's chunks are only queued when it is sent: this is what makes them durable
  // across a clean stop.)
  size_t close(std::chrono::milliseconds timeout);
  // Deletes every chunk of this store's model and format, or of every model; with `owner`,
  // only the chunks that uid's requests wrote.
  Status clear(bool all_models, std::optional<uint32_t> owner = std::nullopt);
  StoreStats stats() const;
  const KvFormat& format() const;
  const std::filesystem::path& dir() const;

  // Diagnostics for tests (and the crash tests of the engine): waits for the writer to be
  // between two chunks, then checks that every row's file exists, has the row's size and
  // verifies (header, checksums, tokens equal to the row's), that every chunk file has a
  // row, that no temp file is left, and that contains() and stats() agree with the index.
  // Slow (reads every chunk); not for the serving path.
  Status check_consistency();

  class Impl;

 private:
  explicit ChunkStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The fingerprint of a weights file: XXH3-128 of its whole contents, as 32 lowercase hex
// digits. Remembered in `cache_dir`'s index by (absolute path, size, mtime), so a restart
// does not read the file again; a changed file is hashed again.
Result<std::string> model_fingerprint(const std::filesystem::path& cache_dir, const std::filesystem::path& model_file);

// Test hook: how many times model_fingerprint() has read a whole file in this process
// (a remembered fingerprint does not count).
uint64_t model_fingerprint_files_hashed();

}  // namespace hearth::storage
