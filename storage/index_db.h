// The sqlite index of the prompt cache: one row per chunk file, and the remembered model
// fingerprints. WAL journal, synchronous=NORMAL: a power cut may lose the last commits but
// never corrupts the database, and a lost row only leaves a file without a row, which
// ChunkStore::open() re-indexes. This header keeps sqlite3.h out of everything else.
//
// Thread-safety: none; the store serializes every call (its io mutex).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hearth::storage {

struct IndexRow {
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::string format;  // format_key() of the chunk's KvFormat
  uint64_t scope = 0;  // root of the chunk's hash chain (its cache scope)
  uint32_t owner = 0;  // uid whose request wrote it
  std::vector<int32_t> tokens;
  uint64_t bytes = 0;      // size of the chunk file
  int64_t created_us = 0;  // unix time, microseconds
  int64_t last_used_us = 0;
  uint64_t hits = 0;
};

struct IndexTouch {
  uint64_t hash = 0;
  int64_t last_used_us = 0;
  uint64_t hits = 0;  // to add
};

class IndexDb {
 public:
  // Opens or creates the database at `file`. When it exists but cannot be opened or read,
  // or fails sqlite's quick_check, it is deleted (with its -wal and -shm) and created
  // empty, setting *rebuilt. An error when even that fails (e.g. a read-only directory).
  static Result<std::unique_ptr<IndexDb>> open(const std::filesystem::path& file, bool* rebuilt);
  // An index that lives in memory only (the directory cannot be written).
  static Result<std::unique_ptr<IndexDb>> open_memory();
  ~IndexDb();
  IndexDb(const IndexDb&) = delete;
  IndexDb& operator=(const IndexDb&) = delete;

  Status insert(const IndexRow& row);                 // replaces a row with the same hash
  Status remove(std::span<const uint64_t> hashes);    // one transaction
  Status touch(std::span<const IndexTouch> touches);  // one transaction
  // Every row (tokens only when with_tokens), or those of one format.
  Result<std::vector<IndexRow>> rows(bool with_tokens, const std::string* format = nullptr);
  // Up to `limit` chunks no other chunk names as its parent (leaves of the prefix tree),
  // least recently used first; with `owner`, only that uid's. Only hash, format, owner and
  // bytes are filled.
  Result<std::vector<IndexRow>> eviction_candidates(size_t limit, std::optional<uint32_t> owner = std::nullopt);
  // Any chunks, least recently used first (used only if no leaf exists, i.e. a cycle).
  Result<std::vector<IndexRow>> lru_candidates(size_t limit);
  // The chunks the index lists and their bytes, whichever store (model) wrote them.
  struct Totals {
    uint64_t entries = 0;
    uint64_t bytes = 0;
  };
  Result<Totals> totals();
  // The bytes each uid's chunks take, whichever store (model) wrote them.
  Result<std::vector<std::pair<uint32_t, uint64_t>>> owner_bytes();

  std::optional<std::string> remembered_fingerprint(const std::string& path, uint64_t size, int64_t mtime_ns);
  Status remember_fingerprint(const std::string& path, uint64_t size, int64_t mtime_ns, const std::string& fp);

  // sqlite's primary result code of the last failed call (SQLITE_FULL, SQLITE_READONLY, ...).
  int last_error_code() const { return last_error_; }
  static bool is_full_code(int code);      // disk full
  static bool is_readonly_code(int code);  // read-only file system, database or permission

 private:
  explicit IndexDb(sqlite3* db) : db_(db) {}
  Status exec(const char* sql);
  Status fail(const char* what);
  sqlite3_stmt* prepare(sqlite3_stmt** slot, const char* sql);
  Status init_schema();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* remove_ = nullptr;
  sqlite3_stmt* touch_ = nullptr;
  int last_error_ = 0;
};

}  // namespace hearth::storage
