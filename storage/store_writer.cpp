// The writer thread of the prompt cache: persists queued chunks, applies the LRU touches
// and row deletions handed over by load(), and evicts down to the byte budget.
//
// Write order, and why each step is there (a kill -9 or power cut may stop it anywhere):
//   1. write header, token ids and payload to ".<hash>.kv.tmp" in the chunk's final
//      directory: a reader never sees a half-written file under a chunk's name, and the
//      rename below stays within one directory (atomic).
//   2. fsync the temp file: its bytes are on disk before any name points at them; without
//      it a crash after the rename could leave a full-size file of zeros or stale blocks.
//   3. rename it to "<hash>.kv": the chunk appears whole or not at all.
//   4. fsync the directory: the rename itself is durable before the row claims the file.
//   5. insert the row: from now on the index names a durable, complete file. A crash
//      between 3 and 5 leaves a good file without a row, which open() re-indexes; a crash
//      before 3 leaves a temp file, which open() deletes. A row never names a missing file
//      (except when someone deletes files behind our back; open() drops those rows).
// Eviction deletes the file first, then the row, so a crash in between leaves a row
// without a file, which open() drops.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "storage/store_impl.h"

namespace hearth::storage {
namespace {

// Errors after which writing more is pointless: the disk or the directory refuses us.
bool stops_writing(int err) {
  return err == ENOSPC || err == EDQUOT || err == EROFS || err == EACCES || err == EPERM;
}

bool write_all(FileOps& ops, int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ops.write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    if (w == 0) {
      errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void ChunkStore::Impl::writer_loop() {
  for (;;) {
    std::optional<ChunkWrite> item;
    {
      std::unique_lock lk(mu);
      if (wait_for_work(lk)) {
        lk.unlock();
        std::lock_guard io(io_mu);
        try_resume();
        continue;
      }
      if (!queue.empty()) {
        item = std::move(queue.front());
        queue.pop_front();
        in_flight = true;
        in_flight_owner = item->owner;
        in_flight_dropped = false;
      } else if (stop && touches.empty() && row_deletes.empty()) {
        return;
      }
    }
    {
      std::lock_guard io(io_mu);
      apply_pending();
      bool dropped = false;
      {
        std::lock_guard lk(mu);
        dropped = in_flight_dropped;
      }
      // A clear() between taking the chunk and here dropped it with the queue.
      if (item && !dropped) write_chunk(*item);
    }
    {
      std::lock_guard lk(mu);
      if (item) queued.erase(item->hash);
      in_flight = false;
      ++steps;
    }
    idle.notify_all();
  }
}

void ChunkStore::Impl::apply_pending() {
  std::vector<uint64_t> deletes;
  std::vector<IndexTouch> batch;
  {
    std::lock_guard lk(mu);
    deletes.swap(row_deletes);
    batch.reserve(touches.size());
    for (auto& [hash, t] : touches) batch.push_back(t);
    touches.clear();
  }
  // Failures only cost LRU accuracy or leave a row that open() or the next load() drops.
  if (Status s = db->remove(deletes); !s) LOG_DEBUG("prompt cache: " + s.error().message);
  if (Status s = db->touch(batch); !s) LOG_DEBUG("prompt cache: " + s.error().message);
}

bool ChunkStore::Impl::wait_for_work(std::unique_lock<std::mutex>& lk) {
  auto ready = [&] { return stop || !queue.empty() || !touches.empty() || !row_deletes.empty(); };
  if (!stopped_full) {
    wake.wait(lk, ready);
    return false;
  }
  if (wake.wait_until(lk, next_space_check, ready)) return false;
  next_space_check = std::chrono::steady_clock::now() + options.space_recheck;
  return true;
}

void ChunkStore::Impl::try_resume() {
  {
    std::lock_guard lk(mu);
    if (!stopped_full || closing) return;
  }
  const std::string probe = (chunks_dir / ".space-probe.kv.tmp").string();  // a temp name: open() deletes it
  const int fd = ops->open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::vector<uint8_t> zeros(size_t{1} << 20);
  const bool ok = write_all(*ops, fd, zeros.data(), zeros.size()) && ops->fsync(fd) == 0;
  ops->close(fd);
  ops->unlink(probe.c_str());
  if (!ok) return;
  std::lock_guard lk(mu);
  stopped_full = false;
  st.writing = true;
  LOG_INFO("prompt cache: space is back in " + options.dir.string() +
           "; writing again (it stopped: " + st.stopped_reason + ")");
  st.stopped_reason.clear();
}

void ChunkStore::Impl::stop_writing(const std::string& reason, bool full) {
  std::lock_guard lk(mu);
  if (!st.writing) return;
  st.writing = false;
  st.stopped_reason = reason;
  stopped_full = full;
  next_space_check = std::chrono::steady_clock::now() + options.space_recheck;
  // What is still queued will not be written: count it as dropped.
  st.dropped_writes += queue.size();
  for (const ChunkWrite& c : queue) queued.erase(c.hash);
  queue.clear();
  LOG_ERROR("prompt cache: stopped writing to " + options.dir.string() + ": " + reason +
            "; chunks already cached are still served");
}

bool ChunkStore::Impl::fsync_dir(const std::filesystem::path& dir) {
  const int fd = ops->open(dir.c_str(), O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return false;
  const bool ok = ops->fsync(fd) == 0;
  const int err = errno;
  ops->close(fd);
  errno = err;
  return ok;
}

bool ChunkStore::Impl::ensure_dir(const std::filesystem::path& dir, bool fsync_parent) {
  if (ops->mkdir(dir.c_str(), 0700) == 0) return !fsync_parent || fsync_dir(dir.parent_path());
  return errno == EEXIST;
}

void ChunkStore::Impl::write_chunk(ChunkWrite& c) {
  {
    std::lock_guard lk(mu);
    if (!st.writing) return;  // stopped while this chunk waited (already counted dropped)
  }
  const std::string rel = chunk_relative_path(c.hash);
  const std::filesystem::path subdir = chunks_dir / rel.substr(0, 2);
  const std::string tmp = (subdir / temp_file_name(c.hash)).string();
  const std::string final_path = (chunks_dir / rel).string();
  const std::vector<uint8_t> prefix = encode_chunk_prefix(format, c);
  const uint64_t file_bytes = prefix.size() + c.payload.size();

  // Each failure: undo what exists, then either stop writing or count one write error.
  auto fail = [&](const char* step, int err, const std::string* remove) {
    if (remove) ops->unlink(remove->c_str());
    if (stops_writing(err)) {
      stop_writing(std::string(std::strerror(err)) + " (" + step + " " + final_path + ")",
                   err == ENOSPC || err == EDQUOT);
    } else {
      std::lock_guard lk(mu);
      ++st.write_errors;
      LOG_WARN("prompt cache: " + std::string(step) + " " + final_path + ": " + std::strerror(err) + "; chunk dropped");
    }
  };

  if (!ensure_dir(chunks_dir, false) || !ensure_dir(subdir, true)) return fail("mkdir", errno, nullptr);
  const int fd = ops->open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return fail("create", errno, nullptr);
  bool ok =
      write_all(*ops, fd, prefix.data(), prefix.size()) && write_all(*ops, fd, c.payload.data(), c.payload.size());
  const char* step = "write";
  if (ok && ops->fsync(fd) != 0) {
    ok = false;
    step = "fsync";
  }
  int err = errno;
  if (ops->close(fd) != 0 && ok) {
    ok = false;
    step = "close";
    err = errno;
  }
  if (!ok) return fail(step, err, &tmp);
  if (ops->rename(tmp.c_str(), final_path.c_str()) != 0) return fail("rename", errno, &tmp);
  if (!fsync_dir(subdir)) return fail("fsync directory of", errno, &final_path);

  IndexRow row;
  row.hash = c.hash;
  row.parent = c.parent;
  row.format = key;
  row.scope = c.scope;
  row.owner = c.owner;
  row.tokens = std::move(c.tokens);
  row.bytes = file_bytes;
  row.created_us = row.last_used_us = now_stamp_us();
  if (Status s = db->insert(row); !s) {
    const int code = db->last_error_code();
    ops->unlink(final_path.c_str());
    if (IndexDb::is_full_code(code)) return stop_writing("index: disk full", true);
    if (IndexDb::is_readonly_code(code)) return stop_writing(s.error().message, false);
    std::lock_guard lk(mu);
    ++st.write_errors;
    LOG_WARN("prompt cache: " + s.error().message + "; chunk dropped");
    return;
  }
  {
    std::lock_guard lk(mu);
    add_known_locked(c.hash, file_bytes, c.owner);
    ++st.written_chunks;
    st.written_bytes += file_bytes;
  }
  evict_to_budget();
}

void ChunkStore::Impl::refresh_totals() {
  Result<IndexDb::Totals> indexed = db->totals();
  if (!indexed) return;
  std::lock_guard lk(mu);
  st.entries = indexed->entries;
  st.bytes = indexed->bytes;
}

ChunkStore::Impl::EvictionTarget ChunkStore::Impl::eviction_target() {
  // The directory's bytes: the index's total, since other models' stores (one per loaded
  // model in a daemon serving several) write there too and this store's counts miss
  // their chunks written after its open. The counts serve when the index cannot answer.
  refresh_totals();
  Result<std::vector<std::pair<uint32_t, uint64_t>>> owners = db->owner_bytes();
  std::lock_guard lk(mu);
  const uint64_t over = st.bytes > options.max_bytes ? st.bytes - options.max_bytes : 0;
  if (!owners || owners->empty()) return {std::nullopt, over};
  const uint64_t share = options.max_bytes / owners->size();
  st.share_bytes = share;
  st.directory_owner_bytes = std::map<uint32_t, uint64_t>(owners->begin(), owners->end());
  // The user furthest past a limit: the quota first (it holds whatever the total), then the
  // fair share while the directory is over its budget (someone is then past it).
  auto furthest_past = [&](uint64_t limit) {
    EvictionTarget t;
    for (const auto& [owner, bytes] : *owners)
      if (bytes > limit && bytes - limit > t.bytes) t = {owner, bytes - limit};
    return t;
  };
  if (options.user_max_bytes > 0)
    if (EvictionTarget t = furthest_past(options.user_max_bytes); t.bytes > 0) return t;
  if (over == 0) return {};
  EvictionTarget t = furthest_past(share);
  if (t.bytes == 0) return {std::nullopt, over};
  t.bytes = std::min(t.bytes, over);
  return t;
}

void ChunkStore::Impl::evict_to_budget() {
  for (;;) {
    const EvictionTarget target = eviction_target();
    if (target.bytes == 0) return;
    auto victims = db->eviction_candidates(16, target.owner);
    // That user's chunks may all be parents of others' (a shared scope): then anyone's.
    if (victims && victims->empty() && target.owner) victims = db->eviction_candidates(16);
    if (victims && victims->empty()) victims = db->lru_candidates(16);  // only with a parent cycle
    if (!victims || victims->empty() || !evict(*victims, target.bytes)) return;
  }
}

bool ChunkStore::Impl::evict(const std::vector<IndexRow>& victims, uint64_t bytes) {
  std::vector<uint64_t> gone;
  bool unlink_failed = false;
  uint64_t freed = 0;
  for (const IndexRow& v : victims) {
    const bool ours = v.format == key;
    bool counted = true;  // false: load() already forgot it (and fixed the totals)
    if (freed >= bytes) break;
    {
      std::lock_guard lk(mu);
      // Forget it before the unlink, so a load() of this hash misses instead of racing it.
      if (ours) counted = erase_known_locked(v.hash);
    }
    const std::string path = path_of(v.hash);
    if (ops->unlink(path.c_str()) != 0 && errno != ENOENT) {
      LOG_WARN("prompt cache: cannot evict " + path + ": " + std::strerror(errno));
      std::lock_guard lk(mu);
      if (ours && counted) add_known_locked(v.hash, v.bytes, v.owner);
      unlink_failed = true;
      break;
    }
    freed += v.bytes;
    std::lock_guard lk(mu);
    if (!ours) erase_other_locked(v.hash);
    ++st.evictions;
    gone.push_back(v.hash);
  }
  if (Status s = db->remove(gone); !s) {
    LOG_WARN("prompt cache: " + s.error().message);  // open() drops these rows later
    return false;
  }
  return !unlink_failed && !gone.empty();
}

}  // namespace hearth::storage
