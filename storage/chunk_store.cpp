// ChunkStore: opening, loading, queueing, closing, clearing. The on-disk format is in
// chunk_file.h, the index in index_db.h, the write order (and why) in store_writer.cpp.
//
// Directory layout:
//   <dir>/index.sqlite (+ -wal, -shm)   the index: chunks and remembered model fingerprints
//   <dir>/chunks/ab/abcdef0123456789.kv one file per chunk, named by its chain hash
//   <dir>/chunks/ab/.abcdef0123456789.kv.tmp  a chunk being written (deleted by open())
#include "storage/chunk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/thread_name.h"
#include "storage/store_impl.h"

namespace hearth::storage {

int64_t now_stamp_us() {
  static std::atomic<int64_t> last{0};
  const int64_t now =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  int64_t prev = last.load();
  int64_t next;
  do {
    next = std::max(now, prev + 1);
  } while (!last.compare_exchange_weak(prev, next));
  return next;
}

namespace {
void add_owner(StoreStats& st, uint32_t owner, uint64_t bytes) {
  OwnerTotals& o = st.owners[owner];
  ++o.entries;
  o.bytes += bytes;
}
void remove_owner(StoreStats& st, uint32_t owner, uint64_t bytes) {
  auto it = st.owners.find(owner);
  if (it == st.owners.end()) return;
  --it->second.entries;
  it->second.bytes -= bytes;
  if (it->second.entries == 0) st.owners.erase(it);
}
}  // namespace

void ChunkStore::Impl::add_known_locked(uint64_t hash, uint64_t bytes, uint32_t owner) {
  auto [it, fresh] = known.try_emplace(hash);
  if (!fresh) {
    st.bytes -= it->second.bytes;
    st.model_bytes -= it->second.bytes;
    --st.entries;
    --st.model_entries;
    remove_owner(st, it->second.owner, it->second.bytes);
  }
  it->second = Known{next_generation++, bytes, owner};
  ++st.entries;
  st.bytes += bytes;
  ++st.model_entries;
  st.model_bytes += bytes;
  add_owner(st, owner, bytes);
}

void ChunkStore::Impl::add_other_locked(uint64_t hash, uint64_t bytes) {
  if (!others.emplace(hash, bytes).second) return;
  ++st.entries;
  st.bytes += bytes;
}

void ChunkStore::Impl::erase_other_locked(uint64_t hash) {
  auto it = others.find(hash);
  if (it == others.end()) return;
  --st.entries;
  st.bytes -= it->second;
  others.erase(it);
}

bool ChunkStore::Impl::erase_known_locked(uint64_t hash) {
  auto it = known.find(hash);
  if (it == known.end()) return false;
  --st.entries;
  st.bytes -= it->second.bytes;
  --st.model_entries;
  st.model_bytes -= it->second.bytes;
  remove_owner(st, it->second.owner, it->second.bytes);
  known.erase(it);
  return true;
}

namespace {

// mkdir -p with mode 0700 for what is created; existing directories keep their mode.
Status make_dirs(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return make_error(dir.string() + " exists and is not a directory");
    return {};
  }
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (Status s = make_dirs(dir.parent_path()); !s) return s;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return make_error("cannot create " + dir.string() + ": " + std::strerror(errno));
  }
  return {};
}

std::vector<uint64_t> hashes_of(const std::vector<IndexRow>& rows) {
  std::vector<uint64_t> out;
  out.reserve(rows.size());
  for (const IndexRow& r : rows) out.push_back(r.hash);
  return out;
}

Status validate(const KvFormat& f) {
  if (f.model_fingerprint.empty() || f.model_fingerprint.size() > 32) {
    return make_error("prompt cache: the model fingerprint must have 1 to 32 characters");
  }
  if (f.bytes_per_token() == 0) return make_error("prompt cache: the KV format has zero bytes per token");
  if (f.n_layer > 4096 || f.kv_dim > (1u << 20) || f.row_bytes > (1u << 24) || f.n_sliding > f.n_layer) {
    return make_error("prompt cache: KV format out of range");
  }
  if (!row_bytes_match(f)) return make_error("prompt cache: the KV row size does not match its type and length");
  return {};
}

}  // namespace

Result<std::unique_ptr<ChunkStore>> ChunkStore::open(const StoreOptions& options, const KvFormat& format) {
  if (Status s = validate(format); !s) return s.error();
  if (options.dir.empty()) return make_error("prompt cache: no directory given");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.dir = std::filesystem::absolute(options.dir);
  impl->format = format;
  impl->key = format_key(format);
  impl->ops = options.file_ops ? options.file_ops : std::make_shared<FileOps>();
  impl->chunks_dir = impl->options.dir / "chunks";
  impl->st.budget = options.max_bytes;
  const std::filesystem::path& dir = impl->options.dir;

  if (Status s = make_dirs(dir); !s) return make_error("prompt cache: " + s.error().message);
  if (DIR* d = ::opendir(dir.c_str())) {
    ::closedir(d);
  } else {
    return make_error("prompt cache: cannot read " + dir.string() + ": " + std::strerror(errno));
  }
  // The chunks and the index hold token ids and KV: as sensitive as the prompts' text. The
  // folder is the daemon user's alone, whatever mode it was made with.
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) == 0 && dst.st_uid == ::geteuid() && (dst.st_mode & 077) != 0) {
    if (::chmod(dir.c_str(), 0700) == 0) LOG_INFO("prompt cache: made " + dir.string() + " private (mode 0700)");
  }
  if (::mkdir(impl->chunks_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    LOG_DEBUG("prompt cache: cannot create " + impl->chunks_dir.string() + ": " + std::strerror(errno));
  }

  bool rebuilt = false;
  auto db = IndexDb::open(dir / "index.sqlite", &rebuilt);
  if (rebuilt) LOG_WARN("prompt cache: the index in " + dir.string() + " was unreadable; rebuilt it");
  if (db) {
    impl->db = std::move(*db);
    for (const char* suffix : {"", "-wal", "-shm"}) ::chmod((dir.string() + "/index.sqlite" + suffix).c_str(), 0600);
  } else {
    auto mem = IndexDb::open_memory();
    if (!mem) return mem.error();
    impl->db = std::move(*mem);
    impl->memory_index = true;
    impl->st.writing = false;
    impl->st.stopped_reason = db.error().message;
    LOG_WARN("prompt cache: " + db.error().message + "; serving the cached chunks read-only");
  }

  {
    std::lock_guard io(impl->io_mu);
    impl->reconcile();
    if (!impl->memory_index) impl->evict_to_budget();
  }
  Impl* raw = impl.get();
  impl->writer = std::thread([raw] {
    set_thread_name("hearth-store");
    raw->writer_loop();
  });
  return std::unique_ptr<ChunkStore>(new ChunkStore(std::move(impl)));
}

ChunkStore::ChunkStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ChunkStore::~ChunkStore() {
  close(std::chrono::seconds(5));
}

bool ChunkStore::contains(uint64_t hash) const {
  std::lock_guard lk(impl_->mu);
  return impl_->known.count(hash) || impl_->queued.count(hash);
}

bool ChunkStore::enqueue(ChunkWrite chunk) {
  Impl& m = *impl_;
  const bool valid = chunk.hash != 0 && !chunk.tokens.empty() && chunk.tokens.size() <= (size_t{1} << 24) &&
                     chunk.payload.size() == chunk.tokens.size() * m.format.bytes_per_token();
  std::lock_guard lk(m.mu);
  if (!valid) {
    ++m.st.write_errors;
    LOG_DEBUG("prompt cache: refused a malformed chunk (hash 0, no tokens, or payload size wrong)");
    return false;
  }
  if (m.known.count(chunk.hash) || m.queued.count(chunk.hash)) return false;
  if (m.closing || !m.st.writing || m.queue.size() >= m.options.queue_max) {
    ++m.st.dropped_writes;
    return false;
  }
  m.queued.insert(chunk.hash);
  m.queue.push_back(std::move(chunk));
  m.wake.notify_one();
  return true;
}

std::optional<std::vector<uint8_t>> ChunkStore::load(uint64_t hash, std::span<const int32_t> expected_tokens,
                                                     uint64_t scope, Sections sections) {
  Impl& m = *impl_;
  uint64_t generation = 0;
  {
    std::lock_guard lk(m.mu);
    auto it = m.known.find(hash);
    if (it == m.known.end()) {
      ++m.st.misses;
      return std::nullopt;
    }
    generation = it->second.generation;
  }
  const std::string path = m.path_of(hash);
  ReadExpect expect;
  expect.format = &m.format;
  expect.hash = hash;
  expect.scope = scope;
  expect.tokens = expected_tokens;
  expect.with_tokens = true;
  expect.sections = sections;
  ChunkRead c;
  try {
    c = read_chunk_file(*m.ops, path, expect);
  } catch (const std::exception& e) {  // std::bad_alloc: a miss, not a crash
    c.error = ReadError::kIo;
    c.detail = e.what();
  }

  std::lock_guard lk(m.mu);
  if (c.error == ReadError::kNone) {
    ++m.st.hits;
    m.st.restored_bytes += c.payload.size();
    IndexTouch& t = m.touches[hash];
    t.hash = hash;
    t.last_used_us = now_stamp_us();
    ++t.hits;
    m.wake.notify_one();
    return std::move(c.payload);
  }
  ++m.st.misses;
  if (c.error == ReadError::kIo) {
    LOG_DEBUG("prompt cache: cannot read " + path + ": " + c.detail);
    return std::nullopt;
  }
  if (c.error == ReadError::kOtherScope) return std::nullopt;  // another scope's: not ours to delete
  // Missing or invalid: forget it, unless the writer replaced it meanwhile (new generation).
  auto it = m.known.find(hash);
  if (it == m.known.end() || it->second.generation != generation) return std::nullopt;
  m.erase_known_locked(hash);
  m.row_deletes.push_back(hash);
  if (c.error == ReadError::kInvalid) {
    ++m.st.checksum_failures;
    m.ops->unlink(path.c_str());
    LOG_WARN("prompt cache: deleted damaged chunk " + path + ": " + c.detail);
  }
  m.wake.notify_one();
  return std::nullopt;
}

void ChunkStore::prefetch(std::span<const PrefetchItem> items) {
  Impl& m = *impl_;
  const KvFormat& f = m.format;
  for (const PrefetchItem& item : items) {
    uint64_t file_bytes = 0;
    {
      std::lock_guard lk(m.mu);
      auto it = m.known.find(item.hash);
      if (it == m.known.end()) continue;
      file_bytes = it->second.bytes;
    }
    // A kGlobal load reads everything but the second section: header, ids, first section.
    off_t length = 0;  // to the end of the file
    if (item.sections == Sections::kGlobal && f.n_sliding > 0 && file_bytes > kChunkHeaderBytes) {
      const uint64_t n_tokens = (file_bytes - kChunkHeaderBytes) / (4 + f.bytes_per_token());
      length = static_cast<off_t>(kChunkHeaderBytes + n_tokens * (4 + f.global_bytes_per_token()));
    }
    const std::string path = m.path_of(item.hash);
    const int fd = m.ops->open(path.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, length, POSIX_FADV_WILLNEED);
    m.ops->close(fd);
  }
}

size_t ChunkStore::close(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock lk(m.mu);
  if (m.closed || m.stop) return 0;
  m.closing = true;
  // However long the queue takes, as long as the writer gets through it: a deadline on the
  // whole drain dropped chunks of answers already sent whenever the disk was slow (a 2,000
  // token prompt is 125 chunks, two fsyncs each). Only a writer stuck for `timeout` loses them.
  auto drained = [&] { return m.queue.empty() && !m.in_flight; };
  while (!drained()) {
    const uint64_t steps = m.steps;
    if (!m.idle.wait_for(lk, timeout, [&] { return drained() || m.steps != steps; })) break;
  }
  const size_t left = m.queue.size();
  for (const ChunkWrite& c : m.queue) m.queued.erase(c.hash);
  m.queue.clear();
  m.stop = true;
  m.wake.notify_all();
  lk.unlock();
  if (m.writer.joinable()) m.writer.join();
  lk.lock();
  m.closed = true;
  return left;
}

Status ChunkStore::clear(bool all_models, std::optional<uint32_t> owner) {
  Impl& m = *impl_;
  std::lock_guard io(m.io_mu);
  {
    std::lock_guard lk(m.mu);
    // Every queued chunk is of this model; with an owner, only that owner's are dropped.
    std::deque<ChunkWrite> kept;
    for (ChunkWrite& c : m.queue) {
      if (owner && c.owner != *owner) {
        kept.push_back(std::move(c));
      } else {
        m.queued.erase(c.hash);
      }
    }
    m.queue = std::move(kept);
    // The chunk the writer took before this clear is dropped too: it waits for io_mu, held
    // here, and checks this once it has it.
    if (m.in_flight && (!owner || m.in_flight_owner == *owner)) m.in_flight_dropped = true;
  }
  m.apply_pending();
  auto rows = m.db->rows(false, all_models ? nullptr : &m.key);
  if (!rows) return rows.error();
  if (owner) std::erase_if(*rows, [&](const IndexRow& r) { return r.owner != *owner; });
  std::string first_error;
  for (const IndexRow& r : *rows) {
    const std::string path = m.path_of(r.hash);
    if (m.ops->unlink(path.c_str()) != 0 && errno != ENOENT && first_error.empty()) {
      first_error = "cannot delete " + path + ": " + std::strerror(errno);
    }
  }
  // The rows listed above, not every row of the format: another model's store may have
  // indexed a chunk since, whose file was not among those deleted. Removing its row would
  // leave the file, and that store still counting it as present.
  Status removed = m.db->remove(hashes_of(*rows));
  {
    std::lock_guard lk(m.mu);
    for (const IndexRow& r : *rows) {
      if (r.format == m.key) {
        m.erase_known_locked(r.hash);
      } else {
        m.erase_other_locked(r.hash);
      }
    }
  }
  if (!removed) return removed;
  m.refresh_totals();  // another store may have cleared or written meanwhile
  if (!first_error.empty()) return make_error("prompt cache: " + first_error);
  return {};
}

StoreStats ChunkStore::stats() const {
  std::lock_guard lk(impl_->mu);
  StoreStats s = impl_->st;
  s.user_max_bytes = impl_->options.user_max_bytes;
  s.queue_depth = impl_->queue.size() + (impl_->in_flight ? 1 : 0);
  return s;
}

const KvFormat& ChunkStore::format() const {
  return impl_->format;
}
const std::filesystem::path& ChunkStore::dir() const {
  return impl_->options.dir;
}

Status ChunkStore::check_consistency() {
  std::lock_guard io(impl_->io_mu);
  return impl_->check();
}

}  // namespace hearth::storage
