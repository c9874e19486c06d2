#include "engine/scheduler/prefix_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>

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

PrefixCache::PrefixCache(BlockPool& pool, Backend& backend, const KvTensors& kv, const ModelConfig& c, uint64_t seed,
                         storage::ChunkStore* store)
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
  for (size_t l = 0; l < n_layer && c.sliding_window > 0; ++l) sliding_[l] = l < c.layer_swa.size() && c.layer_swa[l];
  n_sliding_ = static_cast<int32_t>(std::ranges::count(sliding_, true));
  window_ = n_sliding_ > 0 ? c.sliding_window : 0;
  int32_t next = 0;  // full-attention layers first, then the sliding ones
  payload_slot_.assign(n_layer, 0);
  for (int pass = 0; pass < 2; ++pass)
    for (size_t l = 0; l < n_layer; ++l)
      if (sliding_[l] == (pass == 1)) payload_slot_[l] = next++;
  assert(!store_ || store_->format().n_sliding == static_cast<uint32_t>(n_sliding_));
}

int32_t PrefixCache::window_first_block(int32_t n_tokens) const {
  if (window_ <= 0) return n_tokens / bt_;
  return std::max(0, n_tokens - window_ + 1) / bt_;
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

int32_t PrefixCache::attach_prefix(std::span<const int32_t> tokens, int32_t limit, BlockTable& table,
                                   SeqCacheState& st) {
  assert(table.capacity() == 0);
  hash_blocks(tokens, static_cast<int32_t>(tokens.size()), st);
  const int32_t n_full = limit / bt_;
  auto block_ids = [&](int32_t i) { return tokens.subspan(static_cast<size_t>(i * bt_), static_cast<size_t>(bt_)); };
  auto chunk_name = [&](int32_t chunk) { return st.hashes[static_cast<size_t>((chunk + 1) * kChunkBlocks - 1)]; };
  auto in_memory = [&](int32_t i) {
    const int32_t b = pool_.find(st.hashes[static_cast<size_t>(i)]);
    return b >= 0 && std::ranges::equal(pool_.tokens(b), block_ids(i)) ? b : -1;
  };
  auto on_disk = [&](int32_t chunk) {
    return store_ && (chunk + 1) * kChunkBlocks <= n_full && store_->contains(chunk_name(chunk));
  };
  // How far memory and disk reach together; the window of that end is what needs the
  // sliding-window layers' KV.
  int32_t reach = 0;
  while (reach < n_full) {
    if (in_memory(reach) >= 0) {
      ++reach;
    } else if (on_disk(reach / kChunkBlocks)) {
      reach = (reach / kChunkBlocks + 1) * kChunkBlocks;
    } else {
      break;
    }
  }
  const int32_t need_from = window_first_block(reach * bt_);
  auto sections_for = [&](int32_t chunk) {
    return (chunk + 1) * kChunkBlocks > need_from ? storage::Sections::kAll : storage::Sections::kGlobal;
  };
  if (store_) {
    // What will be read starts now, all of it, while the first chunks are verified and copied.
    std::vector<storage::PrefetchItem> wanted;
    for (int32_t c = 0; (c + 1) * kChunkBlocks <= reach; ++c) {
      const int32_t b = pool_.find(chunk_name(c));
      if (b < 0 || (sections_for(c) == storage::Sections::kAll && pool_.sliding_missing(b)))
        wanted.push_back({chunk_name(c), sections_for(c)});
    }
    if (const auto [tail, tail_n] = find_tail(tokens, reach, limit, st); tail_n > 0) wanted.push_back({tail});
    store_->prefetch(wanted);
  }
  std::vector<bool> from_disk;
  int32_t i = 0;
  while (i < reach) {
    const int32_t b = in_memory(i);
    if (b >= 0) {
      pool_.attach(b);
      table.append(b, bt_);
      from_disk.push_back(false);
      ++i;
      continue;
    }
    const int32_t chunk = i / kChunkBlocks;
    if (!store_ || !restore_chunk(tokens, chunk, i, table, st, sections_for(chunk))) break;
    from_disk.resize(static_cast<size_t>((chunk + 1) * kChunkBlocks), true);
    i = (chunk + 1) * kChunkBlocks;
  }
  // A chunk that failed to load ends the prefix early, and the window moves back with it.
  i = complete_window(tokens, table, st);
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
      pool_.attach(from);  // keeps it from being the block allocate() reuses
      const int32_t to = pool_.allocate();
      // A failed copy leaves `to` unused: those tokens are prefilled instead.
      if (to >= 0 && copy_block(from, to, common)) {
        table.append(to, bt_);
        st.memory_tokens += common;
        n += common;
      } else if (to >= 0) {
        pool_.release(to);
      }
      pool_.release(from);
    } else if (store_) {
      const int32_t got = restore_tail(tokens, i, limit, table, st);
      st.disk_tokens += got;
      n += got;
    }
  }
  st.named_blocks = i;  // attached blocks were named by their owner, restored ones here
  // chunks_done stays 0: on_computed offers every full chunk the writer does not have yet,
  // so a chunk the writer once dropped (queue full) is written by a later user.
  return n;
}

bool PrefixCache::restore_chunk(std::span<const int32_t> tokens, int32_t chunk, int32_t first_block, BlockTable& table,
                                SeqCacheState& st, storage::Sections sections) {
  const int32_t last = (chunk + 1) * kChunkBlocks - 1;
  const uint64_t name = st.hashes[static_cast<size_t>(last)];
  if (!store_->contains(name)) return false;
  if (n_sliding_ == 0) sections = storage::Sections::kAll;
  const auto chunk_ids = tokens.subspan(static_cast<size_t>(chunk) * chunk_tokens_, chunk_tokens_);
  std::optional<std::vector<uint8_t>> payload = store_->load(name, chunk_ids, st.root, sections);
  if (!payload) return false;
  const bool global_only = sections == storage::Sections::kGlobal;
  const size_t n_layers = kv_.k.size() - (global_only ? static_cast<size_t>(n_sliding_) : 0);
  if (payload->size() != n_layers * 2 * chunk_tokens_ * row_bytes_) return false;
  // Every block of the chunk is written before any joins the table, so a failed write
  // (the device, not the file) leaves the table as it was and the caller prefills.
  std::vector<int32_t>& blocks = restoring_;
  blocks.clear();
  auto give_back = [&] {
    for (int32_t b : blocks) pool_.release(b);
    return false;
  };
  for (int32_t blk = first_block; blk <= last; ++blk) {
    const int32_t b = pool_.allocate();
    if (b < 0) return give_back();  // cannot happen while the pool holds n_ctx per sequence
    blocks.push_back(b);
  }
  if (Status w = transfer(*payload, chunk_tokens_, blocks, first_block - chunk * kChunkBlocks, false, true); !w) {
    LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
    return give_back();
  }
  for (int32_t blk = first_block; blk <= last; ++blk) {
    const int32_t b = blocks[static_cast<size_t>(blk - first_block)];
    table.append(b, bt_);
    pool_.name_full(b, st.hashes[static_cast<size_t>(blk)], parent_of(st, static_cast<size_t>(blk)),
                    tokens.subspan(static_cast<size_t>(blk * bt_), static_cast<size_t>(bt_)), st.owner);
    pool_.set_sliding_missing(b, global_only);
  }
  st.restore_bytes += payload->size();
  return true;
}

bool PrefixCache::fill_sliding(std::span<const int32_t> tokens, int32_t chunk, const BlockTable& table,
                               SeqCacheState& st) {
  const size_t first = static_cast<size_t>(chunk * kChunkBlocks);
  const size_t last = first + kChunkBlocks - 1;
  if (!store_ || last >= st.hashes.size()) return false;
  std::optional<std::vector<uint8_t>> payload =
      store_->load(st.hashes[last], tokens.subspan(first * static_cast<size_t>(bt_), chunk_tokens_), st.root);
  if (!payload || payload->size() != kv_.k.size() * 2 * chunk_tokens_ * row_bytes_) return false;
  st.restore_bytes += payload->size();
  for (size_t blk = first; blk <= last && blk < table.blocks().size(); ++blk) {
    const int32_t b = table.blocks()[blk];
    if (!pool_.sliding_missing(b)) continue;
    if (Status w = transfer(*payload, chunk_tokens_, {&b, 1}, static_cast<int32_t>(blk - first), true, true); !w) {
      LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
      return false;
    }
    pool_.set_sliding_missing(b, false);
  }
  return true;
}

int32_t PrefixCache::complete_window(std::span<const int32_t> tokens, BlockTable& table, SeqCacheState& st) {
  int32_t n = static_cast<int32_t>(table.blocks().size());
  for (;;) {
    int32_t bad = -1;
    for (int32_t b = window_first_block(n * bt_); b < n && bad < 0; ++b) {
      if (pool_.sliding_missing(table.blocks()[static_cast<size_t>(b)]) &&
          !fill_sliding(tokens, b / kChunkBlocks, table, st))
        bad = b;
    }
    if (bad < 0) return n;
    table.truncate(pool_, static_cast<size_t>(bad));
    n = bad;
  }
}

Status PrefixCache::transfer(std::span<uint8_t> payload, size_t n_tokens, std::span<const int32_t> blocks,
                             int32_t first_j, bool sliding_only, bool to_device) {
  const size_t bt = static_cast<size_t>(bt_);
  for (size_t l = 0; l < kv_.k.size(); ++l) {
    if (sliding_only && !sliding_[l]) continue;
    for (int kind = 0; kind < 2; ++kind) {
      const Tensor& t = tensor(l, kind);
      for (size_t k = 0; k < blocks.size(); ++k) {
        const size_t first = (static_cast<size_t>(first_j) + k) * bt;  // the block's first token in the chunk
        assert(first < n_tokens);
        const size_t at = payload_offset(l, kind, first, n_tokens);
        if (at >= payload.size()) continue;  // a layer of the section not read
        const size_t n = std::min(bt, n_tokens - first) * row_bytes_;
        assert(at + n <= payload.size());
        const size_t slot = slot_offset(t, blocks[k] * bt_);
        Status s = to_device ? backend_.write(*t.buffer, slot, payload.data() + at, n)
                             : backend_.read(*t.buffer, slot, payload.data() + at, n);
        if (!s) return s;
      }
    }
  }
  return {};
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
  const size_t at = static_cast<size_t>(i * bt_);
  const auto [name, n] = find_tail(tokens, i, limit, st);
  if (n == 0) return 0;
  std::optional<std::vector<uint8_t>> payload = store_->load(name, tokens.subspan(at, n), st.root);
  if (!payload || payload->size() != kv_.k.size() * 2 * n * row_bytes_) return 0;
  const int32_t b = pool_.allocate();
  if (b < 0) return 0;
  if (Status w = transfer(*payload, n, {&b, 1}, 0, false, true); !w) {
    LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
    pool_.release(b);
    return 0;
  }
  table.append(b, bt_);  // its own block, never named here: the sequence writes the rest
  st.restore_bytes += payload->size();
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
    table.append(b, bt_);
    st.memory_tokens += bt_;
    n += bt_;
    st.named_blocks = std::max(st.named_blocks, static_cast<int32_t>(i) + 1);
  }
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
  if (Status r = transfer(w.payload, n, blocks, 0, false, false); !r) {
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
      copies_.push_back(BufferCopy{t.buffer, slot_offset(t, from * bt_), t.buffer, slot_offset(t, to * bt_), bytes});
    }
  Status st = backend_.copy(copies_);
  if (!st)
    LOG_WARN("prompt cache: copying a partial block failed, its tokens are computed instead: " + st.error().message);
  return st.ok();
}

}  // namespace hearth
