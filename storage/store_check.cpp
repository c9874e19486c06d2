// open()'s reconciliation of the index with the files, and check_consistency().
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "storage/store_impl.h"

namespace hearth::storage {

ChunkDirScan scan_chunk_dir(const std::filesystem::path& chunks_dir) {
  namespace fs = std::filesystem;
  ChunkDirScan out;
  std::error_code ec;
  auto note = [&out](const fs::path& p, const std::string& name, const std::string& subdir) {
    if (is_temp_file_name(name)) {
      out.temps.push_back(p.string());
      return;
    }
    uint64_t hash = 0;
    if (!parse_chunk_file_name(name, &hash) || name.compare(0, 2, subdir) != 0) return;  // not ours: left alone
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    ChunkDirScan::File f;
    f.path = p.string();
    f.bytes = static_cast<uint64_t>(st.st_size);
    f.mtime_us = int64_t{st.st_mtim.tv_sec} * 1000000 + st.st_mtim.tv_nsec / 1000;
    out.chunks.emplace(hash, std::move(f));
  };
  for (fs::directory_iterator top(chunks_dir, ec), end; !ec && top != end; top.increment(ec)) {
    const std::string name = top->path().filename().string();
    if (top->is_directory(ec) && !top->is_symlink(ec)) {
      if (name.size() != 2) continue;
      std::error_code ec2;
      for (fs::directory_iterator in(top->path(), ec2); !ec2 && in != end; in.increment(ec2)) {
        note(in->path(), in->path().filename().string(), name);
      }
    } else if (is_temp_file_name(name)) {
      out.temps.push_back(top->path().string());
    }
  }
  return out;
}

// Rows without files are dropped; files without rows are re-indexed when they verify and
// deleted otherwise; temp files (a write interrupted before its rename) are deleted.
// With an in-memory index (read-only directory) nothing is deleted and files are indexed
// from their headers (load() verifies payloads anyway). Without options.reconcile (another
// store of this process writes in the directory) the rows are taken as they are.
void ChunkStore::Impl::reconcile() {
  if (!options.reconcile) {
    Result<std::vector<IndexRow>> rows = db->rows(false);
    if (!rows) {
      LOG_WARN("prompt cache: " + rows.error().message);
      return;
    }
    std::lock_guard lk(mu);
    for (const IndexRow& r : *rows) {
      if (r.format == key) {
        add_known_locked(r.hash, r.bytes, r.owner);
      } else {
        add_other_locked(r.hash, r.bytes);
      }
    }
    return;
  }
  ChunkDirScan scan = scan_chunk_dir(chunks_dir);
  if (!memory_index) {
    for (const std::string& t : scan.temps) ops->unlink(t.c_str());
  }
  auto rows = db->rows(false);
  if (!rows) {
    LOG_WARN("prompt cache: " + rows.error().message);
    rows = std::vector<IndexRow>{};
  }
  std::vector<uint64_t> drop;
  std::unordered_map<uint64_t, IndexRow> indexed;
  // Rows of another chunk format version are dropped; their files, unindexed now, fail to
  // verify below and are deleted.
  const std::string version_suffix = ":v" + std::to_string(kChunkFormatVersion);
  for (IndexRow& r : *rows) {
    auto f = scan.chunks.find(r.hash);
    if (f == scan.chunks.end() || f->second.bytes != r.bytes || !r.format.ends_with(version_suffix)) {
      drop.push_back(r.hash);  // a size mismatch is re-verified below as an unindexed file
    } else {
      indexed.emplace(r.hash, std::move(r));
    }
  }
  if (Status s = db->remove(drop); !s) LOG_WARN("prompt cache: " + s.error().message);

  size_t reindexed = 0, removed = 0;
  for (const auto& [hash, file] : scan.chunks) {
    if (indexed.count(hash)) continue;
    ReadExpect expect;
    expect.hash = hash;
    expect.keep_payload = false;
    expect.skip_payload = memory_index;
    ChunkRead c = read_chunk_file(*ops, file.path, expect);
    if (c.error != ReadError::kNone) {
      if (!memory_index && c.error != ReadError::kMissing) {
        ops->unlink(file.path.c_str());
        ++removed;
      }
      continue;
    }
    IndexRow r;
    r.hash = hash;
    r.parent = c.header.parent;
    r.format = format_key(c.header.format);
    r.scope = c.header.scope;
    r.owner = c.header.owner;
    r.tokens = std::move(c.tokens);
    r.bytes = file.bytes;
    r.created_us = r.last_used_us = file.mtime_us;
    if (Status s = db->insert(r); !s) {
      LOG_WARN("prompt cache: " + s.error().message);
      continue;
    }
    r.tokens.clear();
    indexed.emplace(hash, std::move(r));
    ++reindexed;
  }
  if (!drop.empty() || reindexed || removed || !scan.temps.empty()) {
    LOG_INFO("prompt cache: reconciled " + options.dir.string() + ": " + std::to_string(drop.size()) +
             " rows without files dropped, " + std::to_string(reindexed) + " files re-indexed, " +
             std::to_string(removed) + " invalid files and " + std::to_string(scan.temps.size()) +
             " temp files deleted");
  }

  std::lock_guard lk(mu);
  for (const auto& [hash, r] : indexed) {
    if (r.format == key) {
      add_known_locked(hash, r.bytes, r.owner);
    } else {
      add_other_locked(hash, r.bytes);
    }
  }
}

Status ChunkStore::Impl::check() {
  apply_pending();
  std::vector<std::string> problems;
  auto problem = [&problems](std::string p) {
    if (problems.size() < 20) problems.push_back(std::move(p));
  };
  ChunkDirScan scan = scan_chunk_dir(chunks_dir);
  for (const std::string& t : scan.temps) problem("temp file left: " + t);
  auto rows = db->rows(true);
  if (!rows) return rows.error();

  uint64_t bytes = 0, model_entries = 0, model_bytes = 0;
  std::unordered_set<uint64_t> row_hashes;
  for (const IndexRow& r : *rows) {
    row_hashes.insert(r.hash);
    bytes += r.bytes;
    if (r.format == key) {
      ++model_entries;
      model_bytes += r.bytes;
    }
    const std::string path = path_of(r.hash);
    auto f = scan.chunks.find(r.hash);
    if (f == scan.chunks.end()) {
      problem("row without file: " + path);
      continue;
    }
    if (f->second.bytes != r.bytes) problem("size differs from its row: " + path);
    ReadExpect expect;
    expect.hash = r.hash;
    expect.tokens = r.tokens;
    expect.with_tokens = true;
    expect.keep_payload = false;
    ChunkRead c = read_chunk_file(*ops, path, expect);
    if (c.error != ReadError::kNone) {
      problem("chunk does not verify: " + path + ": " + c.detail);
    } else if (format_key(c.header.format) != r.format || c.header.parent != r.parent || c.header.scope != r.scope ||
               c.header.owner != r.owner) {
      problem("header differs from its row: " + path);
    }
  }
  for (const auto& [hash, f] : scan.chunks) {
    if (!row_hashes.count(hash)) problem("file without row: " + f.path);
  }

  {
    std::lock_guard lk(mu);
    if (st.entries != rows->size() || st.bytes != bytes) {
      problem("stats say " + std::to_string(st.entries) + " chunks, " + std::to_string(st.bytes) +
              " bytes; the index has " + std::to_string(rows->size()) + ", " + std::to_string(bytes));
    }
    if (st.model_entries != model_entries || st.model_bytes != model_bytes || known.size() != model_entries) {
      problem("this model's chunks in memory (" + std::to_string(known.size()) + ") differ from the index (" +
              std::to_string(model_entries) + ")");
    }
    for (const auto& [hash, k] : known) {
      if (!row_hashes.count(hash)) problem("contains() a chunk without a row: " + path_of(hash));
    }
  }
  if (problems.empty()) return {};
  std::string msg = "prompt cache inconsistent:";
  for (const std::string& p : problems) msg += "\n  " + p;
  return make_error(msg);
}

}  // namespace hearth::storage
