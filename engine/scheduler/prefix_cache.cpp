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

PrefixCache::PrefixCache(BlockPool& pool, Backend& backend, const KvTensors& kv, uint64_t seed,
                         storage::ChunkStore* store)
    : pool_(pool), backend_(backend), kv_(kv), seed_(seed), store_(store), bt_(pool.block_tokens()) {
  assert(!kv.k.empty());
  row_bytes_ = kv.k[0].row_size();
  for (size_t l = 0; l < kv.k.size(); ++l) assert(kv.k[l].row_stride == row_bytes_ && kv.v[l].row_stride == row_bytes_);
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
  if (store_) {
    // Chunks the memory tier lacks start reading now, all of them, while the first are
    // verified and copied.
    std::vector<uint64_t> wanted;
    for (int32_t c = 0; (c + 1) * kChunkBlocks <= n_full; ++c) {
      const uint64_t name = st.hashes[static_cast<size_t>((c + 1) * kChunkBlocks - 1)];
      if (pool_.find(name) < 0) wanted.push_back(name);
    }
    store_->prefetch(wanted);
  }
  int32_t i = 0;
  while (i < n_full) {
    const int32_t b = pool_.find(st.hashes[static_cast<size_t>(i)]);
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i * bt_), static_cast<size_t>(bt_));
    if (b >= 0 && std::ranges::equal(pool_.tokens(b), block_tokens)) {
      pool_.attach(b);
      table.append(b, bt_);
      st.memory_tokens += bt_;
      ++i;
      continue;
    }
    const int32_t chunk = i / kChunkBlocks;
    if (store_ && (chunk + 1) * kChunkBlocks <= n_full && restore_chunk(tokens, chunk, i, table, st)) {
      i = (chunk + 1) * kChunkBlocks;
      continue;
    }
    break;
  }
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
    }
  }
  st.named_blocks = i;  // attached blocks were named by their owner, restored ones here
  // chunks_done stays 0: on_computed offers every full chunk the writer does not have yet,
  // so a chunk the writer once dropped (queue full) is written by a later user.
  return n;
}

bool PrefixCache::restore_chunk(std::span<const int32_t> tokens, int32_t chunk, int32_t first_block, BlockTable& table,
                                SeqCacheState& st) {
  const int32_t last = (chunk + 1) * kChunkBlocks - 1;
  const uint64_t name = st.hashes[static_cast<size_t>(last)];
  if (!store_->contains(name)) return false;
  const int32_t chunk_tokens = kChunkBlocks * bt_;
  const auto chunk_ids = tokens.subspan(static_cast<size_t>(chunk * chunk_tokens), static_cast<size_t>(chunk_tokens));
  std::optional<std::vector<uint8_t>> payload = store_->load(name, chunk_ids, st.root);
  if (!payload) return false;
  const size_t n_layer = kv_.k.size();
  if (payload->size() != n_layer * 2 * static_cast<size_t>(chunk_tokens) * row_bytes_) return false;
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
    const int32_t j = blk - chunk * kChunkBlocks;  // block within the chunk
    for (size_t l = 0; l < n_layer; ++l)
      for (int kind = 0; kind < 2; ++kind) {
        const Tensor& t = tensor(l, kind);
        const size_t src =
            ((l * 2 + static_cast<size_t>(kind)) * static_cast<size_t>(chunk_tokens) + static_cast<size_t>(j * bt_)) *
            row_bytes_;
        Status w = backend_.write(*t.buffer, slot_offset(t, b * bt_), payload->data() + src,
                                  static_cast<size_t>(bt_) * row_bytes_);
        if (!w) {
          LOG_WARN("prompt cache: restoring a chunk failed, its tokens are computed instead: " + w.error().message);
          return give_back();
        }
      }
  }
  for (int32_t blk = first_block; blk <= last; ++blk) {
    const int32_t b = blocks[static_cast<size_t>(blk - first_block)];
    table.append(b, bt_);
    pool_.name_full(b, st.hashes[static_cast<size_t>(blk)], parent_of(st, static_cast<size_t>(blk)),
                    tokens.subspan(static_cast<size_t>(blk * bt_), static_cast<size_t>(bt_)), st.owner);
    st.disk_tokens += bt_;
  }
  st.restore_bytes += payload->size();
  return true;
}

int32_t PrefixCache::extend(std::span<const int32_t> tokens, int32_t n, int32_t limit, BlockTable& table,
                            SeqCacheState& st) {
  while (n % bt_ == 0 && n + bt_ <= limit && table.capacity() == n) {
    const size_t i = static_cast<size_t>(n / bt_);
    if (i >= st.hashes.size()) break;
    const int32_t b = pool_.find(st.hashes[i]);
    const auto block_tokens = tokens.subspan(static_cast<size_t>(n), static_cast<size_t>(bt_));
    if (b < 0 || !std::ranges::equal(pool_.tokens(b), block_tokens)) break;
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
  if (!store_) return;
  const size_t last = static_cast<size_t>((chunk + 1) * kChunkBlocks - 1);
  storage::ChunkWrite w;
  w.hash = st.hashes[last];
  if (store_->contains(w.hash)) return;
  w.parent = chunk == 0 ? 0 : st.hashes[static_cast<size_t>(chunk * kChunkBlocks - 1)];
  w.scope = st.root;
  w.owner = st.owner;
  const size_t chunk_tokens = static_cast<size_t>(kChunkBlocks * bt_);
  const auto ids = tokens.subspan(static_cast<size_t>(chunk) * chunk_tokens, chunk_tokens);
  w.tokens.assign(ids.begin(), ids.end());
  const size_t n_layer = kv_.k.size();
  w.payload.resize(n_layer * 2 * chunk_tokens * row_bytes_);
  for (size_t l = 0; l < n_layer; ++l)
    for (int kind = 0; kind < 2; ++kind)
      for (int32_t j = 0; j < kChunkBlocks; ++j) {
        const Tensor& t = tensor(l, kind);
        const int32_t b = table.blocks()[static_cast<size_t>(chunk * kChunkBlocks + j)];
        const size_t dst =
            ((l * 2 + static_cast<size_t>(kind)) * chunk_tokens + static_cast<size_t>(j * bt_)) * row_bytes_;
        Status r = backend_.read(*t.buffer, slot_offset(t, b * bt_), w.payload.data() + dst,
                                 static_cast<size_t>(bt_) * row_bytes_);
        if (!r) {  // not written: a later user of the prefix offers it again
          LOG_WARN("prompt cache: reading a chunk for the disk tier failed: " + r.error().message);
          return;
        }
      }
  if (store_->enqueue(std::move(w))) ++st.chunks_written;
}

void PrefixCache::on_retire(std::span<const int32_t> tokens, int32_t n_computed, const BlockTable& table,
                            const SeqCacheState& st) {
  const int32_t n_full = n_computed / bt_;
  const int32_t rest = n_computed - n_full * bt_;
  if (rest == 0 || static_cast<size_t>(n_full) >= table.blocks().size()) return;
  if (st.named_blocks < n_full) return;  // the chain before it is not named
  pool_.name_partial(table.blocks()[static_cast<size_t>(n_full)], parent_of(st, static_cast<size_t>(n_full)),
                     tokens.subspan(static_cast<size_t>(n_full * bt_), static_cast<size_t>(rest)), st.owner);
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
