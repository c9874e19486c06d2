#include "engine/scheduler/prefix_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "engine/kv/prefix_hash.h"

namespace hearth {

// Why one block (16 tokens) per chunk file. The disk tier resumes a prompt only at a chunk
// boundary, so after a restart up to chunk - 1 tokens are prefilled again, while smaller
// chunks mean more files. Measured with bench/cache_bench.py (default model, CPU, 2
// threads, a 4000-token prompt, chunk files evicted from the page cache, restore with
// prefetch): chunks of 16 / 32 / 64 tokens restored 3984 / 3968 / 3968 tokens (250 /
// 125 / 62 files, ~70 MiB) in 84 / 79 / 75 ms, and the disk hit's TTFT was 145 / 176 /
// 171 ms against ~7.5 s cold (1/54, 1/42, 1/45). Reading is bound by the disk, not by
// the number of files, once they are prefetched together; the leftover prefill is what
// the chunk size changes (256-token chunks: 448 ms, 1/15). So a chunk is a block.

// Threads that read a restore's chunk files beside other sequences' steps: after the
// prefetch the work is verifying and copying from the page cache, so about one per core;
// more only compete with the engine's own threads (measured on 2 cores: 2 threads gave
// the restore 71-81 ms beside a stream, 8 threads 95-129 ms).
namespace {
int reader_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}
}  // namespace

PrefixCache::PrefixCache(BlockPool& pool, Backend& backend, const KvTensors& kv, const ModelConfig& c, uint64_t seed,
                         storage::ChunkStore* store, std::function<void()> on_restore_ready)
    : pool_(pool),
      backend_(backend),
      kv_(kv),
      seed_(seed),
      store_(store),
      bt_(pool.block_tokens()),
      chunk_tokens_(static_cast<size_t>(kChunkBlocks * pool.block_tokens())) {
  assert(!kv.k.empty());
  row_bytes_ = kv.k[0].row_size();
  const size_t n_layer = kv.k.size();
  for (size_t l = 0; l < n_layer; ++l) assert(kv.k[l].row_stride == row_bytes_ && kv.v[l].row_stride == row_bytes_);
  sliding_.assign(n_layer, false);
  for (size_t l = 0; l < n_layer; ++l) sliding_[l] = c.layer_sliding(static_cast<int>(l));
  n_sliding_ = c.n_sliding_layers();
  // A block lacks its sliding-window KV by having no companion.
  assert(n_sliding_ == 0 || pool.bounded_sliding());
  window_ = n_sliding_ > 0 ? c.sliding_window : 0;
  int32_t next = 0;  // full-attention layers first, then the sliding ones
  payload_slot_.assign(n_layer, 0);
  for (int pass = 0; pass < 2; ++pass)
    for (size_t l = 0; l < n_layer; ++l)
      if (sliding_[l] == (pass == 1)) payload_slot_[l] = next++;
  assert(!store_ || store_->format().n_sliding == static_cast<uint32_t>(n_sliding_));
  if (store_ && on_restore_ready)
    reader_ = std::make_unique<RestoreReader>(*store_, reader_threads(), std::move(on_restore_ready));
}

int32_t PrefixCache::window_first_block(int32_t n_tokens) const {
  if (window_ <= 0) return n_tokens / bt_;
  return static_cast<int32_t>(first_window_block(n_tokens, window_, bt_));
}

void PrefixCache::hash_blocks(std::span<const int32_t> tokens, int32_t n_tokens, SeqCacheState& st) const {
  if (st.root == 0) st.root = scope_root(seed_, st.scope_key);
  const size_t n_full = static_cast<size_t>(n_tokens / bt_);
  while (st.hashes.size() < n_full) {
    const size_t i = st.hashes.size();
    st.hashes.push_back(
        block_hash(parent_of(st, i), tokens.subspan(i * static_cast<size_t>(bt_), static_cast<size_t>(bt_))));
  }
}

int32_t PrefixCache::in_memory(std::span<const int32_t> tokens, const SeqCacheState& st, int32_t i) const {
  const int32_t b = pool_.find(st.hashes[static_cast<size_t>(i)]);
  const auto ids = tokens.subspan(static_cast<size_t>(i * bt_), static_cast<size_t>(bt_));
  return b >= 0 && std::ranges::equal(pool_.tokens(b), ids) ? b : -1;
}

int32_t PrefixCache::attach_prefix(std::span<const int32_t> tokens, int32_t limit, BlockTable& table, SeqCacheState& st,
                                   bool beside_others) {
  assert(table.capacity() == 0);
  hash_blocks(tokens, static_cast<int32_t>(tokens.size()), st);
  const int32_t n_full = limit / bt_;
  auto chunk_name = [&](int32_t chunk) { return st.hashes[static_cast<size_t>((chunk + 1) * kChunkBlocks - 1)]; };
  // The blocks memory holds from the start are attached now.
  int32_t i = 0;
  for (int32_t b; i < n_full && (b = in_memory(tokens, st, i)) >= 0; ++i) {
    pool_.attach(b);
    table.append(pool_, b);
  }
  auto p = std::make_shared<PendingRestore>();
  p->first_block = i;
  // How far memory and disk reach together; the window of that end is what needs the
  // sliding-window layers' KV.
  int32_t reach = i;
  while (reach < n_full) {
    const int32_t chunk = reach / kChunkBlocks;
    if (in_memory(tokens, st, reach) >= 0) {
      ++reach;
    } else if (store_ && (chunk + 1) * kChunkBlocks <= n_full && store_->contains(chunk_name(chunk))) {
      reach = (chunk + 1) * kChunkBlocks;
    } else {
      break;
    }
  }
  p->reach = reach;
  const int32_t need_from = window_first_block(reach * bt_);
  // The companions of blocks before the window go back before any is taken for the chunks
  // in it (they are taken again if a failed chunk moves the window back).
  table.slide(pool_, static_cast<size_t>(need_from));
  // The chunks to read: those memory lacks, and those in the window whose blocks in memory
  // lack their sliding-window KV; whole inside the window, the first section before it.
  auto chunk_ids = [&](size_t at, size_t n) {
    const auto ids = tokens.subspan(at, n);
    return std::vector<int32_t>(ids.begin(), ids.end());
  };
  for (int32_t c = i / kChunkBlocks; (c + 1) * kChunkBlocks <= reach; ++c) {
    const bool in_window = (c + 1) * kChunkBlocks > need_from;
    const int32_t b = pool_.find(chunk_name(c));
    if (b >= 0 && !(in_window && pool_.sliding_missing(b))) continue;
    const bool global = !in_window && n_sliding_ > 0;
    p->loads.push_back({chunk_name(c), chunk_ids(static_cast<size_t>(c) * chunk_tokens_, chunk_tokens_),
                        global ? storage::Sections::kGlobal : storage::Sections::kAll, std::nullopt});
  }
  // The block after the reach comes from disk only when memory has no block to copy it from.
  const auto rest = tokens.subspan(static_cast<size_t>(reach * bt_), static_cast<size_t>(limit - reach * bt_));
  const bool tail_in_memory = pool_.best_child(parent_of(st, static_cast<size_t>(reach)), rest).first >= 0;
  if (const auto [tail, tail_n] = find_tail(tokens, reach, limit, st); tail_n > 0 && !tail_in_memory) {
    p->loads.push_back(
        {tail, chunk_ids(static_cast<size_t>(reach * bt_), tail_n), storage::Sections::kAll, std::nullopt});
    p->has_tail = true;
  }
  p->next_block = i;
  p->from_disk.assign(static_cast<size_t>(i), false);
  p->expect_loads();
  st.pending = p;
  if (!p->loads.empty() && reader_ && beside_others) {
    reader_->start(p, st.root);
    return i * bt_;  // advance_restore() goes on as the chunks arrive
  }
  // Alone, the engine reads them itself: the kernel reads every file's part at once
  // (prefetch) while the first are verified and copied, which on this machine kind gives
  // the restore its shortest time; reader threads would only add hand-offs.
  if (store_ && !p->loads.empty()) {
    std::vector<storage::PrefetchItem> items;
    for (const ChunkLoad& l : p->loads) items.push_back({l.name, l.sections});
    store_->prefetch(items);
  }
  p->inline_reads = true;
  return *advance_restore(tokens, limit, table, st, std::chrono::steady_clock::time_point::max());
}

std::optional<int32_t> PrefixCache::advance_restore(std::span<const int32_t> tokens, int32_t limit, BlockTable& table,
                                                    SeqCacheState& st, std::chrono::steady_clock::time_point deadline) {
  assert(st.pending);
  PendingRestore& p = *st.pending;
  const size_t n_chain = p.loads.size() - (p.has_tail ? 1 : 0);
  p.waits_for_read = false;
  while (p.walking && p.next_block < p.reach) {
    const int32_t i = p.next_block;
    assert(table.blocks().size() == static_cast<size_t>(i));
    if (const int32_t b = in_memory(tokens, st, i); b >= 0) {
      pool_.attach(b);
      table.append(pool_, b);
      table.slide(pool_, static_cast<size_t>(window_first_block(p.reach * bt_)));
      p.from_disk.push_back(false);
      ++p.next_block;
      continue;
    }
    const int32_t chunk = i / kChunkBlocks;
    const uint64_t name = st.hashes[static_cast<size_t>((chunk + 1) * kChunkBlocks - 1)];
    while (p.next_load < n_chain && p.loads[p.next_load].name != name) ++p.next_load;
    if (p.next_load == n_chain) break;
    if (!p.done(p.next_load)) {
      if (!p.inline_reads) {
        p.waits_for_read = true;  // on its way
        return std::nullopt;
      }
      read_inline(p, p.next_load, st);
    }
    const bool placed = p.loads[p.next_load].payload && place_chunk(tokens, chunk, i, p.loads[p.next_load], table, st);
    // Freed at once: the next read reuses the memory (already faulted in) instead of
    // touching a fresh 80-300 KB each time.
    p.loads[p.next_load].payload.reset();
    if (!placed) break;
    p.from_disk.resize(static_cast<size_t>((chunk + 1) * kChunkBlocks), true);
    p.next_block = (chunk + 1) * kChunkBlocks;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
  }
  p.walking = false;
  if (!p.inline_reads && !p.ready()) {
    p.waits_for_read = true;  // the tail, or a window's chunk, is on its way
    return std::nullopt;
  }
  const std::vector<bool>& from_disk = p.from_disk;
  // A chunk that failed to load ends the prefix early, and the window moves back with it.
  const int32_t i = complete_window(tokens, table, st);
  const int32_t n_disk = static_cast<int32_t>(std::count(from_disk.begin(), from_disk.begin() + i, true));
  st.disk_tokens += n_disk * bt_;
  st.memory_tokens += (i - n_disk) * bt_;
  int32_t n = i * bt_;
  // The valid part of a block that follows the matched prefix (the tail of a finished
  // conversation turn, or a block that diverges midway) is copied, never shared.
  if (n < limit) {
    auto [from, common] = pool_.best_child(parent_of(st, static_cast<size_t>(i)),
                                           tokens.subspan(static_cast<size_t>(n), static_cast<size_t>(limit - n)));
    if (from >= 0) {
      // Held, with its companion, while the copy is set up: allocate_for_kv() reuses what
      // nobody holds.
      const bool companions = pool_.bounded_sliding();
      pool_.attach(from);
      if (companions) pool_.hold_companion(from);
      // A failed copy leaves `to` unused: those tokens are prefilled instead.
      if (const int32_t to = pool_.allocate_for_kv(); to >= 0 && copy_block(from, to, common)) {
        table.adopt(pool_, to);
        st.memory_tokens += common;
        n += common;
      } else if (to >= 0) {
        pool_.discard(to);
      }
      if (companions) pool_.release_companion(from);
      pool_.release(from);
    } else if (store_) {
      const ChunkLoad* tail = nullptr;
      if (p.has_tail && i == p.reach) {
        if (!p.done(p.loads.size() - 1)) read_inline(p, p.loads.size() - 1, st);
        if (p.loads.back().payload) tail = &p.loads.back();
      }
      const int32_t got = tail ? place_tail(i, limit, *tail, table, st) : restore_tail(tokens, i, limit, table, st);
      st.disk_tokens += got;
      n += got;
    }
  }
  table.slide(pool_, static_cast<size_t>(window_first_block(n)));
  st.named_blocks = i;  // attached blocks were named by their owner, restored ones here
  // chunks_done stays 0: on_computed offers every full chunk the writer does not have yet,
  // so a chunk the writer once dropped (queue full) is written by a later user.
  st.pending.reset();
  return n;
}

void PrefixCache::read_inline(PendingRestore& p, size_t k, const SeqCacheState& st) {
  ChunkLoad& l = p.loads[k];
  l.payload = store_->load(l.name, l.tokens, st.root, l.sections);
  p.set_done(k);
}

bool PrefixCache::place_chunk(std::span<const int32_t> tokens, int32_t chunk, int32_t first_block,
                              const ChunkLoad& load, BlockTable& table, SeqCacheState& st) {
  const int32_t last = (chunk + 1) * kChunkBlocks - 1;
  const std::vector<uint8_t>& payload = *load.payload;
  const bool global_only = load.sections == storage::Sections::kGlobal && n_sliding_ > 0;
  const size_t n_layers = kv_.k.size() - (global_only ? static_cast<size_t>(n_sliding_) : 0);
  if (payload.size() != n_layers * 2 * chunk_tokens_ * row_bytes_) return false;
  // Every block of the chunk is written before any joins the table, so a failed write
  // (the device, not the file) leaves the table as it was and the caller prefills.
  std::vector<int32_t>& blocks = restoring_;
  blocks.clear();
  auto give_back = [&] {
    for (int32_t b : blocks) pool_.discard(b);
    return false;
  };
  for (int32_t blk = first_block; blk <= last; ++blk) {
    const int32_t b = pool_.allocate_for_kv(!global_only);
    if (b < 0) return give_back();
    blocks.push_back(b);
  }
  if (Status w = write_blocks(payload, chunk_tokens_, blocks, first_block - chunk * kChunkBlocks, false); !w) {
    LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
    return give_back();
  }
  for (int32_t blk = first_block; blk <= last; ++blk) {
    const int32_t b = blocks[static_cast<size_t>(blk - first_block)];
    table.adopt(pool_, b);
    pool_.name_full(b, st.hashes[static_cast<size_t>(blk)], parent_of(st, static_cast<size_t>(blk)),
                    tokens.subspan(static_cast<size_t>(blk * bt_), static_cast<size_t>(bt_)), st.owner);
  }
  st.restore_bytes += payload.size();
  return true;
}

bool PrefixCache::fill_sliding(std::span<const int32_t> tokens, int32_t chunk, BlockTable& table, SeqCacheState& st) {
  const size_t first = static_cast<size_t>(chunk * kChunkBlocks);
  const size_t last = first + kChunkBlocks - 1;
  if (!store_ || last >= st.hashes.size()) return false;
  // Read with the rest of the restore when it was planned, else now.
  std::optional<std::vector<uint8_t>> read;
  const std::optional<std::vector<uint8_t>>* payload = &read;
  if (st.pending) {
    const PendingRestore& p = *st.pending;
    for (size_t k = 0; k < p.loads.size(); ++k)
      if (p.loads[k].name == st.hashes[last] && p.loads[k].sections == storage::Sections::kAll && p.done(k))
        payload = &p.loads[k].payload;
  }
  if (payload == &read)
    read = store_->load(st.hashes[last], tokens.subspan(first * static_cast<size_t>(bt_), chunk_tokens_), st.root);
  if (!*payload || (*payload)->size() != kv_.k.size() * 2 * chunk_tokens_ * row_bytes_) return false;
  st.restore_bytes += (*payload)->size();
  for (size_t blk = first; blk <= last && blk < table.blocks().size(); ++blk) {
    const int32_t b = table.blocks()[blk];
    if (table.has_sliding(blk) || table.hold_sliding(pool_, blk)) continue;
    if (!table.add_sliding(pool_, blk)) return false;
    if (Status w = write_blocks(**payload, chunk_tokens_, {&b, 1}, static_cast<int32_t>(blk - first), true); !w) {
      LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
      table.drop_sliding(pool_, blk, true);
      return false;
    }
  }
  return true;
}

int32_t PrefixCache::complete_window(std::span<const int32_t> tokens, BlockTable& table, SeqCacheState& st) {
  int32_t n = static_cast<int32_t>(table.blocks().size());
  for (;;) {
    int32_t bad = -1;
    for (int32_t b = window_first_block(n * bt_); b < n && bad < 0; ++b) {
      const size_t k = static_cast<size_t>(b);
      if (!table.has_sliding(k) && !table.hold_sliding(pool_, k) && !fill_sliding(tokens, b / kChunkBlocks, table, st))
        bad = b;
    }
    if (bad < 0) return n;
    table.truncate(pool_, static_cast<size_t>(bad));
    n = bad;
  }
}

template <class F>
Status PrefixCache::for_each_run(size_t payload_bytes, size_t n_tokens, std::span<const int32_t> blocks,
                                 int32_t first_j, bool sliding_only, F&& f) const {
  const size_t bt = static_cast<size_t>(bt_);
  for (size_t l = 0; l < kv_.k.size(); ++l) {
    if (sliding_only && !sliding_[l]) continue;
    for (int kind = 0; kind < 2; ++kind) {
      const Tensor& t = tensor(l, kind);
      for (size_t k = 0; k < blocks.size(); ++k) {
        const size_t first = (static_cast<size_t>(first_j) + k) * bt;  // the block's first token in the chunk
        assert(first < n_tokens);
        const size_t at = payload_offset(l, kind, first, n_tokens);
        if (at >= payload_bytes) continue;  // a layer of the section not read
        const size_t n = std::min(bt, n_tokens - first) * row_bytes_;
        assert(at + n <= payload_bytes);
        if (Status s = f(t, slot_offset(t, slot_block(l, blocks[k]) * bt_), at, n); !s) return s;
      }
    }
  }
  return {};
}

Status PrefixCache::write_blocks(std::span<const uint8_t> payload, size_t n_tokens, std::span<const int32_t> blocks,
                                 int32_t first_j, bool sliding_only) {
  return for_each_run(payload.size(), n_tokens, blocks, first_j, sliding_only,
                      [&](const Tensor& t, size_t slot, size_t at, size_t n) {
                        return backend_.write(*t.buffer, slot, payload.data() + at, n);
                      });
}

Status PrefixCache::read_blocks(std::span<uint8_t> payload, size_t n_tokens, std::span<const int32_t> blocks) {
  return for_each_run(payload.size(), n_tokens, blocks, 0, false,
                      [&](const Tensor& t, size_t slot, size_t at, size_t n) {
                        return backend_.read(*t.buffer, slot, payload.data() + at, n);
                      });
}

uint64_t PrefixCache::tail_name(uint64_t parent, std::span<const int32_t> tail_tokens) {
  return block_hash(parent, tail_tokens);
}

std::pair<uint64_t, size_t> PrefixCache::find_tail(std::span<const int32_t> tokens, int32_t i, int32_t limit,
                                                   const SeqCacheState& st) const {
  static_assert(kChunkBlocks == 1, "a tail chunk is the one block after a chain of chunks");
  const size_t at = static_cast<size_t>(i * bt_);
  if (!store_ || i * bt_ >= limit) return {0, 0};
  // The prompt's next chunk when the prompt fills it but the prefix ends inside it, else
  // the longest tail chunk whose tokens the prompt continues with (a tail may hold more than
  // the prefix uses).
  if ((i + 1) * bt_ > limit && static_cast<size_t>(i) < st.hashes.size() &&
      store_->contains(st.hashes[static_cast<size_t>(i)]))
    return {st.hashes[static_cast<size_t>(i)], static_cast<size_t>(bt_)};
  for (size_t len = std::min(static_cast<size_t>(bt_ - 1), tokens.size() - at); len > 0; --len) {
    const uint64_t h = tail_name(parent_of(st, static_cast<size_t>(i)), tokens.subspan(at, len));
    if (store_->contains(h)) return {h, len};
  }
  return {0, 0};
}

int32_t PrefixCache::restore_tail(std::span<const int32_t> tokens, int32_t i, int32_t limit, BlockTable& table,
                                  SeqCacheState& st) {
  const auto [name, n] = find_tail(tokens, i, limit, st);
  if (n == 0) return 0;
  const auto ids = tokens.subspan(static_cast<size_t>(i * bt_), n);
  ChunkLoad load{name, std::vector<int32_t>(ids.begin(), ids.end()), storage::Sections::kAll, std::nullopt};
  load.payload = store_->load(name, ids, st.root);
  return load.payload ? place_tail(i, limit, load, table, st) : 0;
}

int32_t PrefixCache::place_tail(int32_t i, int32_t limit, const ChunkLoad& load, BlockTable& table, SeqCacheState& st) {
  const size_t n = load.tokens.size();
  const std::vector<uint8_t>& payload = *load.payload;
  if (payload.size() != kv_.k.size() * 2 * n * row_bytes_) return 0;
  const int32_t b = pool_.allocate_for_kv();
  if (b < 0) return 0;
  if (Status w = write_blocks(payload, n, {&b, 1}, 0, false); !w) {
    LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
    pool_.discard(b);
    return 0;
  }
  table.adopt(pool_, b);  // its own block, never named here: the sequence writes the rest
  st.restore_bytes += payload.size();
  return std::min(static_cast<int32_t>(n), limit - i * bt_);
}

int32_t PrefixCache::extend(std::span<const int32_t> tokens, int32_t n, int32_t limit, BlockTable& table,
                            SeqCacheState& st) {
  while (n % bt_ == 0 && n + bt_ <= limit && table.capacity() == n) {
    const size_t i = static_cast<size_t>(n / bt_);
    if (i >= st.hashes.size()) break;
    const int32_t b = pool_.find(st.hashes[i]);
    const auto block_tokens = tokens.subspan(static_cast<size_t>(n), static_cast<size_t>(bt_));
    // A block without its sliding-window KV ends up inside the window here: computed instead.
    if (b < 0 || !std::ranges::equal(pool_.tokens(b), block_tokens) || pool_.sliding_missing(b)) break;
    pool_.attach(b);
    table.append(pool_, b);
    st.memory_tokens += bt_;
    n += bt_;
    st.named_blocks = std::max(st.named_blocks, static_cast<int32_t>(i) + 1);
  }
  table.slide(pool_, static_cast<size_t>(window_first_block(n)));
  return n;
}

void PrefixCache::on_computed(std::span<const int32_t> tokens, int32_t n_computed, const BlockTable& table,
                              SeqCacheState& st) {
  hash_blocks(tokens, n_computed, st);
  const int32_t n_full = n_computed / bt_;
  for (; st.named_blocks < n_full; ++st.named_blocks) {
    const size_t i = static_cast<size_t>(st.named_blocks);
    pool_.name_full(table.blocks()[i], st.hashes[i], parent_of(st, i),
                    tokens.subspan(i * static_cast<size_t>(bt_), static_cast<size_t>(bt_)), st.owner);
  }
  for (; st.chunks_done < n_full / kChunkBlocks; ++st.chunks_done) persist_chunk(tokens, st.chunks_done, table, st);
}

void PrefixCache::persist_chunk(std::span<const int32_t> tokens, int32_t chunk, const BlockTable& table,
                                SeqCacheState& st) {
  const size_t first = static_cast<size_t>(chunk * kChunkBlocks);
  persist(tokens, first * static_cast<size_t>(bt_), chunk_tokens_, st.hashes[first + kChunkBlocks - 1],
          chunk == 0 ? 0 : st.hashes[first - 1], std::span(table.blocks()).subspan(first, kChunkBlocks), st);
}

void PrefixCache::persist(std::span<const int32_t> tokens, size_t at, size_t n, uint64_t hash, uint64_t parent,
                          std::span<const int32_t> blocks, SeqCacheState& st) {
  if (!store_ || store_->contains(hash)) return;
  // A block restored without its sliding-window KV has nothing there to write.
  if (std::ranges::any_of(blocks, [&](int32_t b) { return pool_.sliding_missing(b); })) return;
  storage::ChunkWrite w;
  w.hash = hash;
  w.parent = parent;
  w.scope = st.root;
  w.owner = st.owner;
  const auto ids = tokens.subspan(at, n);
  w.tokens.assign(ids.begin(), ids.end());
  w.payload.resize(kv_.k.size() * 2 * n * row_bytes_);
  if (Status r = read_blocks(w.payload, n, blocks); !r) {
    // Not written: a later user of the prefix offers it again.
    LOG_WARN("prompt cache: reading a chunk for the disk tier failed: " + r.error().message);
    return;
  }
  if (store_->enqueue(std::move(w))) ++st.chunks_written;
}

void PrefixCache::on_retire(std::span<const int32_t> tokens, int32_t n_computed, const BlockTable& table,
                            SeqCacheState& st) {
  const int32_t n_full = n_computed / bt_;
  const int32_t rest = n_computed - n_full * bt_;
  if (rest == 0 || static_cast<size_t>(n_full) >= table.blocks().size()) return;
  if (st.named_blocks < n_full) return;  // the chain before it is not named
  const size_t at = static_cast<size_t>(n_full * bt_);
  const auto tail = tokens.subspan(at, static_cast<size_t>(rest));
  const uint64_t parent = parent_of(st, static_cast<size_t>(n_full));
  const int32_t block = table.blocks()[static_cast<size_t>(n_full)];
  pool_.name_partial(block, parent, tail, st.owner);
  // On disk too, once the chain before it has been offered: after a restart the same
  // prompt, or the next turn of a chat, resumes at its last token instead of its last
  // block boundary.
  if (st.chunks_done * kChunkBlocks >= n_full)
    persist(tokens, at, tail.size(), tail_name(parent, tail),
            n_full == 0 ? 0 : st.hashes[static_cast<size_t>(n_full - 1)], {&block, 1}, st);
}

bool PrefixCache::copy_block(int32_t from, int32_t to, int32_t n) {
  copies_.clear();
  const size_t bytes = static_cast<size_t>(n) * row_bytes_;
  for (size_t l = 0; l < kv_.k.size(); ++l)
    for (int kind = 0; kind < 2; ++kind) {
      const Tensor& t = tensor(l, kind);
      copies_.push_back(BufferCopy{t.buffer, slot_offset(t, slot_block(l, from) * bt_), t.buffer,
                                   slot_offset(t, slot_block(l, to) * bt_), bytes});
    }
  Status st = backend_.copy(copies_);
  if (!st)
    LOG_WARN("prompt cache: copying a partial block failed, its tokens are computed instead: " + st.error().message);
  return st.ok();
}

}  // namespace hearth
