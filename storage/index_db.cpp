#include "storage/index_db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace hearth::storage {
namespace {

// Chain hashes are unsigned 64-bit; sqlite integers are signed. Stored bit for bit.
int64_t to_db(uint64_t v) {
  return std::bit_cast<int64_t>(v);
}
uint64_t from_db(int64_t v) {
  return std::bit_cast<uint64_t>(v);
}

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS chunks(
  hash INTEGER PRIMARY KEY,      -- chain hash (unsigned 64-bit stored as signed)
  parent INTEGER NOT NULL,       -- 0 for the first chunk of a chain
  format TEXT NOT NULL,          -- model fingerprint, KV dtype, shape, format version
  scope INTEGER NOT NULL,        -- root of the chunk's hash chain: its cache scope
  owner INTEGER NOT NULL,        -- uid whose request wrote it
  tokens BLOB NOT NULL,          -- the token ids, int32 little-endian
  bytes INTEGER NOT NULL,        -- size of the chunk file
  created INTEGER NOT NULL,      -- unix microseconds
  last_used INTEGER NOT NULL,    -- unix microseconds
  hits INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS chunks_parent ON chunks(parent);
CREATE INDEX IF NOT EXISTS chunks_last_used ON chunks(last_used);
CREATE INDEX IF NOT EXISTS chunks_owner ON chunks(owner);
CREATE TABLE IF NOT EXISTS models(
  path TEXT PRIMARY KEY,         -- absolute path of the weights file
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  fingerprint TEXT NOT NULL);    -- XXH3-128 of the contents, 32 hex digits
)sql";

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = 0;
};

bool remove_db_files(const std::filesystem::path& file) {
  bool ok = true;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string p = file.string() + suffix;
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) ok = false;
  }
  return ok;
}

// Opens and checks; *corrupt tells a damaged file from an unusable directory.
sqlite3* try_open(const std::filesystem::path& file, bool* corrupt, std::string* why) {
  *corrupt = false;
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  int rc = sqlite3_open_v2(file.c_str(), &db, flags, nullptr);
  auto fail = [&](int code) -> sqlite3* {
    *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
    const int primary = code & 0xff;
    *corrupt = primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_FORMAT ||
               primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR || primary == SQLITE_MISMATCH;
    sqlite3_close_v2(db);
    return nullptr;
  };
  if (rc != SQLITE_OK) return fail(rc);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 2000);
  {
    Stmt check(db, "PRAGMA quick_check");
    if (!check.ok()) return fail(sqlite3_errcode(db));
    rc = sqlite3_step(check.get());
    if (rc != SQLITE_ROW) return fail(rc);
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0));
    if (!text || std::strcmp(text, "ok") != 0) {
      *why = std::string("quick_check: ") + (text ? text : "?");
      *corrupt = true;
      sqlite3_close_v2(db);
      return nullptr;
    }
  }
  {
    Stmt wal(db, "PRAGMA journal_mode=WAL");
    if (!wal.ok()) return fail(sqlite3_errcode(db));
    rc = sqlite3_step(wal.get());
    if (rc != SQLITE_ROW) return fail(rc);
  }
  return db;
}

}  // namespace

Result<std::unique_ptr<IndexDb>> IndexDb::open(const std::filesystem::path& file, bool* rebuilt) {
  *rebuilt = false;
  bool corrupt = false;
  std::string why;
  sqlite3* db = try_open(file, &corrupt, &why);
  if (!db && corrupt) {
    if (!remove_db_files(file))
      return make_error("index " + file.string() + " is unusable (" + why + ") and cannot be removed");
    *rebuilt = true;
    db = try_open(file, &corrupt, &why);
  }
  if (!db) return make_error("cannot open index " + file.string() + ": " + why);
  std::unique_ptr<IndexDb> out(new IndexDb(db));
  if (Status s = out->init_schema(); !s) {
    if (*rebuilt) return s.error();
    // A readable database whose schema cannot be created or used: start it over once.
    out.reset();
    if (!remove_db_files(file)) return s.error();
    *rebuilt = true;
    db = try_open(file, &corrupt, &why);
    if (!db) return make_error("cannot open index " + file.string() + ": " + why);
    out.reset(new IndexDb(db));
    if (Status s2 = out->init_schema(); !s2) return s2.error();
  }
  return out;
}

Result<std::unique_ptr<IndexDb>> IndexDb::open_memory() {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    sqlite3_close_v2(db);
    return make_error("cannot open an in-memory index");
  }
  std::unique_ptr<IndexDb> out(new IndexDb(db));
  if (Status s = out->init_schema(); !s) return s.error();
  return out;
}

IndexDb::~IndexDb() {
  sqlite3_finalize(insert_);
  sqlite3_finalize(remove_);
  sqlite3_finalize(touch_);
  sqlite3_close_v2(db_);
}

// PRAGMA user_version of the schema above. An index of another version (0: before scopes
// were recorded) loses its chunk rows: open()'s reconciliation then re-indexes the files
// of the current chunk format from their headers and deletes the others.
constexpr int kSchemaVersion = 2;

Status IndexDb::init_schema() {
  if (Status s = exec("PRAGMA synchronous=NORMAL"); !s) return s;
  int version = -1;
  {
    Stmt s(db_, "PRAGMA user_version");
    if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return fail("read user_version");
    version = sqlite3_column_int(s.get(), 0);
  }
  if (version != kSchemaVersion) {
    if (Status s = exec("DROP TABLE IF EXISTS chunks"); !s) return s;
    if (Status s = exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str()); !s) return s;
  }
  return exec(kSchema);
}

Status IndexDb::fail(const char* what) {
  last_error_ = sqlite3_errcode(db_) & 0xff;
  return make_error(std::string("index: ") + what + ": " + sqlite3_errmsg(db_));
}

Status IndexDb::exec(const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    last_error_ = sqlite3_errcode(db_) & 0xff;
    std::string m = std::string("index: ") + (msg ? msg : sqlite3_errmsg(db_));
    sqlite3_free(msg);
    return make_error(m);
  }
  return {};
}

sqlite3_stmt* IndexDb::prepare(sqlite3_stmt** slot, const char* sql) {
  if (!*slot && sqlite3_prepare_v2(db_, sql, -1, slot, nullptr) != SQLITE_OK) {
    sqlite3_finalize(*slot);
    *slot = nullptr;
  }
  if (*slot) sqlite3_reset(*slot);
  return *slot;
}

bool IndexDb::is_full_code(int code) {
  return (code & 0xff) == SQLITE_FULL;
}
bool IndexDb::is_readonly_code(int code) {
  const int c = code & 0xff;
  return c == SQLITE_READONLY || c == SQLITE_PERM || c == SQLITE_AUTH || c == SQLITE_CANTOPEN;
}

Status IndexDb::insert(const IndexRow& row) {
  sqlite3_stmt* s =
      prepare(&insert_,
              "INSERT OR REPLACE INTO chunks(hash, parent, format, tokens, bytes, created, last_used, hits, "
              "scope, owner) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!s) return fail("prepare insert");
  sqlite3_bind_int64(s, 1, to_db(row.hash));
  sqlite3_bind_int64(s, 2, to_db(row.parent));
  sqlite3_bind_text(s, 3, row.format.data(), static_cast<int>(row.format.size()), SQLITE_STATIC);
  sqlite3_bind_blob(s, 4, row.tokens.data(), static_cast<int>(row.tokens.size() * 4), SQLITE_STATIC);
  sqlite3_bind_int64(s, 5, static_cast<int64_t>(row.bytes));
  sqlite3_bind_int64(s, 6, row.created_us);
  sqlite3_bind_int64(s, 7, row.last_used_us);
  sqlite3_bind_int64(s, 8, static_cast<int64_t>(row.hits));
  sqlite3_bind_int64(s, 9, to_db(row.scope));
  sqlite3_bind_int64(s, 10, static_cast<int64_t>(row.owner));
  const int rc = sqlite3_step(s);
  sqlite3_clear_bindings(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) return fail("insert");
  return {};
}

Status IndexDb::remove(std::span<const uint64_t> hashes) {
  if (hashes.empty()) return {};
  sqlite3_stmt* s = prepare(&remove_, "DELETE FROM chunks WHERE hash = ?");
  if (!s) return fail("prepare delete");
  if (Status b = exec("BEGIN"); !b) return b;
  for (uint64_t h : hashes) {
    sqlite3_bind_int64(s, 1, to_db(h));
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
      Status e = fail("delete");
      (void)exec("ROLLBACK");
      return e;
    }
  }
  return exec("COMMIT");
}

Status IndexDb::touch(std::span<const IndexTouch> touches) {
  if (touches.empty()) return {};
  sqlite3_stmt* s = prepare(&touch_, "UPDATE chunks SET last_used = max(last_used, ?), hits = hits + ? WHERE hash = ?");
  if (!s) return fail("prepare touch");
  if (Status b = exec("BEGIN"); !b) return b;
  for (const IndexTouch& t : touches) {
    sqlite3_bind_int64(s, 1, t.last_used_us);
    sqlite3_bind_int64(s, 2, static_cast<int64_t>(t.hits));
    sqlite3_bind_int64(s, 3, to_db(t.hash));
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
      Status e = fail("touch");
      (void)exec("ROLLBACK");
      return e;
    }
  }
  return exec("COMMIT");
}

Result<std::vector<IndexRow>> IndexDb::rows(bool with_tokens, const std::string* format) {
  std::string sql = "SELECT hash, parent, format, bytes, created, last_used, hits, scope, owner";
  sql += with_tokens ? ", tokens FROM chunks" : " FROM chunks";
  if (format) sql += " WHERE format = ?";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return fail("prepare select").error();
  if (format) sqlite3_bind_text(s.get(), 1, format->data(), static_cast<int>(format->size()), SQLITE_STATIC);
  std::vector<IndexRow> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    IndexRow r;
    r.hash = from_db(sqlite3_column_int64(s.get(), 0));
    r.parent = from_db(sqlite3_column_int64(s.get(), 1));
    const auto* f = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 2));
    r.format = f ? f : "";
    r.bytes = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 3));
    r.created_us = sqlite3_column_int64(s.get(), 4);
    r.last_used_us = sqlite3_column_int64(s.get(), 5);
    r.hits = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 6));
    r.scope = from_db(sqlite3_column_int64(s.get(), 7));
    r.owner = static_cast<uint32_t>(sqlite3_column_int64(s.get(), 8));
    if (with_tokens) {
      const void* blob = sqlite3_column_blob(s.get(), 9);
      const int n = sqlite3_column_bytes(s.get(), 9);
      r.tokens.resize(static_cast<size_t>(n) / 4);
      if (blob && !r.tokens.empty()) std::memcpy(r.tokens.data(), blob, r.tokens.size() * 4);
    }
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return fail("select").error();
  return out;
}

namespace {
Result<std::vector<IndexRow>> victims(sqlite3* db, const char* sql, size_t limit,
                                      std::optional<uint32_t> owner = std::nullopt) {
  Stmt s(db, sql);
  if (!s.ok()) return make_error(std::string("index: ") + sqlite3_errmsg(db));
  sqlite3_bind_int64(s.get(), 1, static_cast<int64_t>(limit));
  if (owner) sqlite3_bind_int64(s.get(), 2, static_cast<int64_t>(*owner));
  std::vector<IndexRow> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    IndexRow r;
    r.hash = from_db(sqlite3_column_int64(s.get(), 0));
    const auto* f = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 1));
    r.format = f ? f : "";
    r.bytes = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 2));
    r.owner = static_cast<uint32_t>(sqlite3_column_int64(s.get(), 3));
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return make_error(std::string("index: ") + sqlite3_errmsg(db));
  return out;
}
}  // namespace

Result<std::vector<IndexRow>> IndexDb::eviction_candidates(size_t limit, std::optional<uint32_t> owner) {
  if (owner)
    return victims(db_,
                   "SELECT hash, format, bytes, owner FROM chunks AS c WHERE c.owner = ?2 AND NOT EXISTS "
                   "(SELECT 1 FROM chunks AS d WHERE d.parent = c.hash AND d.hash != c.hash) "
                   "ORDER BY last_used, created, hash LIMIT ?1",
                   limit, owner);
  return victims(db_,
                 "SELECT hash, format, bytes, owner FROM chunks AS c WHERE NOT EXISTS "
                 "(SELECT 1 FROM chunks AS d WHERE d.parent = c.hash AND d.hash != c.hash) "
                 "ORDER BY last_used, created, hash LIMIT ?",
                 limit);
}

Result<std::vector<std::pair<uint32_t, uint64_t>>> IndexDb::owner_bytes() {
  Stmt s(db_, "SELECT owner, COALESCE(SUM(bytes), 0) FROM chunks GROUP BY owner ORDER BY owner");
  if (!s.ok()) return make_error(std::string("index: ") + sqlite3_errmsg(db_));
  std::vector<std::pair<uint32_t, uint64_t>> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW)
    out.emplace_back(static_cast<uint32_t>(sqlite3_column_int64(s.get(), 0)),
                     static_cast<uint64_t>(sqlite3_column_int64(s.get(), 1)));
  if (rc != SQLITE_DONE) return make_error(std::string("index: ") + sqlite3_errmsg(db_));
  return out;
}

Result<IndexDb::Totals> IndexDb::totals() {
  Stmt s(db_, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM chunks");
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return make_error(std::string("index: ") + sqlite3_errmsg(db_));
  return Totals{static_cast<uint64_t>(sqlite3_column_int64(s.get(), 0)),
                static_cast<uint64_t>(sqlite3_column_int64(s.get(), 1))};
}

Result<std::vector<IndexRow>> IndexDb::lru_candidates(size_t limit) {
  return victims(db_, "SELECT hash, format, bytes, owner FROM chunks ORDER BY last_used, created, hash LIMIT ?", limit);
}

std::optional<std::string> IndexDb::remembered_fingerprint(const std::string& path, uint64_t size, int64_t mtime_ns) {
  Stmt s(db_, "SELECT fingerprint FROM models WHERE path = ? AND size = ? AND mtime_ns = ?");
  if (!s.ok()) return std::nullopt;
  sqlite3_bind_text(s.get(), 1, path.data(), static_cast<int>(path.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s.get(), 2, static_cast<int64_t>(size));
  sqlite3_bind_int64(s.get(), 3, mtime_ns);
  if (sqlite3_step(s.get()) != SQLITE_ROW) return std::nullopt;
  const auto* fp = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
  if (!fp) return std::nullopt;
  return std::string(fp);
}

Status IndexDb::remember_fingerprint(const std::string& path, uint64_t size, int64_t mtime_ns, const std::string& fp) {
  Stmt s(db_, "INSERT OR REPLACE INTO models(path, size, mtime_ns, fingerprint) VALUES(?, ?, ?, ?)");
  if (!s.ok()) return fail("prepare remember");
  sqlite3_bind_text(s.get(), 1, path.data(), static_cast<int>(path.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s.get(), 2, static_cast<int64_t>(size));
  sqlite3_bind_int64(s.get(), 3, mtime_ns);
  sqlite3_bind_text(s.get(), 4, fp.data(), static_cast<int>(fp.size()), SQLITE_STATIC);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return fail("remember");
  return {};
}

}  // namespace hearth::storage
