// The prompt cache as the scheduler uses it: finds the longest cached prefix of a new
// prompt and puts it into the sequence's block table — named blocks in memory are
// attached (shared), chunks on disk are verified and copied into fresh blocks, and the
// valid part of a remembered partial block is copied — and, as tokens get KV, names the
// full blocks and hands full chunks to the disk writer.
//
// A chunk (the unit on disk) is kChunkBlocks consecutive blocks; it is named by the hash
// of its last block, so memory and disk share one hash chain. Its payload is the
// canonical layout of storage::KvFormat: the full-attention layers, then the
// sliding-window ones; each layer K then V, token by token.
//
// Sliding-window layers attend to the last `window` positions only, so a prefix ending at
// P needs their KV for positions [P - window + 1, P) and nothing before. A restore reads
// the full-attention section of every chunk and the sliding section only of the chunks in
// that window; the other restored blocks are marked (BlockPool::sliding_missing) and are
// completed from disk when a later prefix that needs them attaches them.
//
// Thread-safety: engine thread only (the ChunkStore is thread-safe on its own).
#pragma once

#include <cassert>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "engine/kv/block_pool.h"
#include "engine/model/model.h"
#include "engine/scheduler/restore_io.h"
#include "storage/chunk_store.h"

namespace hearth {

// Blocks per chunk file (16 tokens). Measured on the default model: see prefix_cache.cpp.
inline constexpr int32_t kChunkBlocks = 1;

// A sequence's standing with the cache.
struct SeqCacheState {
  std::string scope_key;         // the request's CacheScope::key
  uint32_t owner = 0;            // ... and owner: recorded with every block and chunk it names
  uint64_t root = 0;             // scope_root(seed, scope_key); set by attach_prefix
  std::vector<uint64_t> hashes;  // name of block i, for every full block known so far
  int32_t named_blocks = 0;      // blocks [0, named_blocks) are named in the pool
  int32_t chunks_done = 0;       // chunks [0, chunks_done) are on disk, queued or skipped
  int32_t memory_tokens = 0;     // prompt tokens attached or copied from memory
  int32_t disk_tokens = 0;       // prompt tokens restored from disk
  int32_t chunks_written = 0;    // chunks this sequence queued for the writer
  double restore_ms = 0;
  uint64_t restore_bytes = 0;  // KV bytes read back from chunk files
  // Set while chunks of this sequence's prefix are being read or placed (attach_prefix
  // returned before finishing): advance_restore() places them as they arrive.
  std::shared_ptr<PendingRestore> pending;
  std::chrono::steady_clock::time_point restore_started;  // when the lookup began (the scheduler's clock)
};

class PrefixCache {
 public:
  // store may be null (memory tier only). kv's rows must be contiguous. c gives the layers
  // that use a sliding window; with a store, its format's n_sliding must count them.
  // on_restore_ready: with a store, chunks are read on reader threads, which call it after
  // each chunk they read (from a reader thread); without it they are read inline.
  PrefixCache(BlockPool& pool, Backend& backend, const KvTensors& kv, const ModelConfig& c, uint64_t seed,
              storage::ChunkStore* store, std::function<void()> on_restore_ready = {});

  uint64_t seed() const { return seed_; }
  storage::ChunkStore* store() const { return store_; }

  // Computes the scope's root and the names of the prompt's full blocks, then fills the (empty) table with
  // the longest cached prefix of tokens[0, limit). Returns the tokens it covers. When
  // chunks are to be read on the reader threads, it returns the part attached from memory
  // so far and sets st.pending; the caller calls advance_restore() as chunks arrive.
  // beside_others: other sequences are stepping; chunks are then read on the reader
  // threads (when there are any), else on the calling thread.
  int32_t attach_prefix(std::span<const int32_t> tokens, int32_t limit, BlockTable& table, SeqCacheState& st,
                        bool beside_others = false);
  // Puts the chunks the pending restore has read so far into the table, in chain order
  // (with whatever memory holds by now), until one is still on its way or `deadline`
  // passes: nullopt, call again. Once all is read and placed, finishes the prefix, clears
  // st.pending and returns the tokens the table covers.
  std::optional<int32_t> advance_restore(std::span<const int32_t> tokens, int32_t limit, BlockTable& table,
                                         SeqCacheState& st, std::chrono::steady_clock::time_point deadline);
  // At a block boundary n (the table holds exactly n tokens), attaches blocks named since
  // (another sequence computed them meanwhile). Returns the new n.
  int32_t extend(std::span<const int32_t> tokens, int32_t n, int32_t limit, BlockTable& table, SeqCacheState& st);
  // Tokens [0, n_computed) have KV: names newly full blocks and queues newly full chunks.
  void on_computed(std::span<const int32_t> tokens, int32_t n_computed, const BlockTable& table, SeqCacheState& st);
  // Before the table is released: remembers the partly filled last block, in memory and
  // (as a tail chunk) on disk.
  void on_retire(std::span<const int32_t> tokens, int32_t n_computed, const BlockTable& table, SeqCacheState& st);

  // The name of the block before block i (the scope's root for block 0).
  uint64_t parent_of(const SeqCacheState& st, size_t i) const { return i == 0 ? st.root : st.hashes[i - 1]; }

 private:
  void hash_blocks(std::span<const int32_t> tokens, int32_t n_tokens, SeqCacheState& st) const;
  // Reads load k on the calling thread (p.inline_reads).
  void read_inline(PendingRestore& p, size_t k, const SeqCacheState& st);
  // The block of the pool named as block i of the prompt, holding its tokens, or -1.
  int32_t in_memory(std::span<const int32_t> tokens, const SeqCacheState& st, int32_t i) const;
  // Copies a chunk's read payload into new blocks for blocks [first_block, end of the
  // chunk) and appends them to the table, named. False (the table unchanged) on failure.
  bool place_chunk(std::span<const int32_t> tokens, int32_t chunk, int32_t first_block, const ChunkLoad& load,
                   BlockTable& table, SeqCacheState& st);
  // Copies a tail chunk (or the prompt's next chunk) read for block i into a block of its
  // own; returns the tokens of it the prefix uses (0 on failure).
  int32_t place_tail(int32_t i, int32_t limit, const ChunkLoad& load, BlockTable& table, SeqCacheState& st);
  // Writes the sliding-window KV of the table's blocks in `chunk` that lack it, from disk.
  bool fill_sliding(std::span<const int32_t> tokens, int32_t chunk, BlockTable& table, SeqCacheState& st);
  // Makes every block in the window of the table's end whole (fill_sliding), dropping the
  // table's tail where that fails. Returns the blocks kept.
  int32_t complete_window(std::span<const int32_t> tokens, BlockTable& table, SeqCacheState& st);
  // The first block holding a position that a prefix of n_tokens still attends to in its
  // sliding-window layers (n_tokens / bt_ when there are none).
  int32_t window_first_block(int32_t n_tokens) const;
  // Where layer l's K (kind 0) or V (kind 1) of token t starts in the payload of a chunk of
  // n_tokens tokens.
  size_t payload_offset(size_t layer, int kind, size_t t, size_t n_tokens) const {
    return ((static_cast<size_t>(payload_slot_[layer]) * 2 + static_cast<size_t>(kind)) * n_tokens + t) * row_bytes_;
  }
  // Copies layer rows between the payload (or its first section) of a chunk of n_tokens
  // tokens and the pool's blocks: blocks[k] holds the chunk's tokens from (first_j + k) *
  // block_tokens on. Layers past the payload's end (a first section alone) are skipped.
  Status write_blocks(std::span<const uint8_t> payload, size_t n_tokens, std::span<const int32_t> blocks,
                      int32_t first_j, bool sliding_only);
  Status read_blocks(std::span<uint8_t> payload, size_t n_tokens, std::span<const int32_t> blocks);
  // Calls f(tensor, offset in its buffer, offset in the payload, bytes) for every run of rows
  // that write_blocks / read_blocks move.
  template <class F>
  Status for_each_run(size_t payload_bytes, size_t n_tokens, std::span<const int32_t> blocks, int32_t first_j,
                      bool sliding_only, F&& f) const;
  // Queues the KV of tokens [at, at + n) — `blocks` hold them — for the writer as chunk `hash`.
  void persist(std::span<const int32_t> tokens, size_t at, size_t n, uint64_t hash, uint64_t parent,
               std::span<const int32_t> blocks, SeqCacheState& st);
  // After the full blocks: the block at token n = i * block_tokens (n < limit) from a chunk
  // on disk — the prompt's next full chunk, or a tail chunk that an earlier sequence left
  // (its last, partly filled block) — copied into a block of its own. Returns the tokens
  // it adds (0 when none).
  int32_t restore_tail(std::span<const int32_t> tokens, int32_t i, int32_t limit, BlockTable& table, SeqCacheState& st);
  // The chunk restore_tail would read: {name, its tokens}, or {0, 0}.
  std::pair<uint64_t, size_t> find_tail(std::span<const int32_t> tokens, int32_t i, int32_t limit,
                                        const SeqCacheState& st) const;
  void persist_chunk(std::span<const int32_t> tokens, int32_t chunk, const BlockTable& table, SeqCacheState& st);
  // The name of a tail chunk: the hash of its (fewer than block_tokens) tokens after parent.
  static uint64_t tail_name(uint64_t parent, std::span<const int32_t> tail_tokens);
  // The K (kind 0) or V (kind 1) tensor of a layer.
  const Tensor& tensor(size_t layer, int kind) const { return kind == 0 ? kv_.k[layer] : kv_.v[layer]; }
  // The block of layer l's slots that holds `block`'s KV: its companion in a sliding-window
  // layer when the pool has companions (it must have one).
  int32_t slot_block(size_t l, int32_t block) const {
    if (!sliding_[l] || !pool_.bounded_sliding()) return block;
    assert(pool_.companion(block) >= 0);
    return pool_.companion(block);
  }
  size_t slot_offset(const Tensor& t, int32_t slot) const {
    return t.offset + static_cast<size_t>(slot) * t.row_stride;
  }
  // Copies the first n slots of block `from` into block `to`, every layer, K and V, on the
  // device. False when the backend failed (`to` then holds nothing usable).
  bool copy_block(int32_t from, int32_t to, int32_t n);

  BlockPool& pool_;
  Backend& backend_;
  const KvTensors& kv_;
  uint64_t seed_;
  storage::ChunkStore* store_;
  int32_t bt_;                         // tokens per block
  size_t chunk_tokens_;                // kChunkBlocks * bt_
  size_t row_bytes_;                   // one token's K (or V) in one layer
  std::vector<bool> sliding_;          // per layer: attends through the window
  std::vector<int32_t> payload_slot_;  // per layer: its place in a chunk payload
  int32_t n_sliding_ = 0;
  int32_t window_ = 0;                     // tokens; 0 when no layer uses one
  std::vector<BufferCopy> copies_;         // copy_block's list, kept to reuse its memory
  std::vector<int32_t> restoring_;         // place_chunk's blocks until all are written
  std::unique_ptr<RestoreReader> reader_;  // null: chunks are read on the engine thread
};

}  // namespace hearth
