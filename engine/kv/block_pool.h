// The KV cache as a pool of fixed-size blocks. Every layer's K and V tensors have
// n_blocks * block_tokens slots; block b owns slots [b * block_tokens, (b + 1) *
// block_tokens) in every layer. A sequence's BlockTable maps its positions to slots
// through the blocks it holds, so sequences take memory as they grow and give it back
// when they end, and the attention op reads through the position -> slot map.
//
// The pool is also the memory tier of the prompt cache (as vLLM's block pool is). A full
// block can be named by its prefix hash (engine/kv/prefix_hash.h); a new sequence whose
// prompt starts with the same tokens attaches the named blocks instead of computing them
// (shared, reference-counted, never written again: only full blocks are named). When the
// last reference goes, a named block is not freed but kept, least recently released
// first in line for reuse; a sequence releases its blocks tail first, so the end of a
// chain is reused before its head. The last, partly filled block of a finished sequence
// is remembered too (as a child of its parent's hash with its tokens), so a later prompt
// can copy its valid part into a block of its own.
//
// Sliding-window companions. A model whose sliding-window layers attend to the last
// `window` positions only needs their KV for the end of each sequence, not for all of it.
// When the pool is built with n_sliding_blocks > 0, those layers' K and V tensors have that
// many blocks of slots instead of n_blocks: a block's sliding-window KV lives in a companion
// block of that smaller pool, taken when the block is allocated and given back once every
// table holding it has moved past its window. A companion with no holder stays with its
// block while the block is named (so a later prompt ending there is a memory hit), least
// recently released first in line for reuse, like the blocks themselves; a block whose
// companion went lacks its sliding-window KV (sliding_missing) and a prefix that needs it
// reads it from disk. Without companions (n_sliding_blocks 0: the model has no sliding
// window) no block lacks anything.
//
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hearth {

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_tokens, int32_t n_sliding_blocks = 0);

  int32_t block_tokens() const { return block_tokens_; }
  int32_t n_total() const { return static_cast<int32_t>(meta_.size()); }
  // Blocks allocate() can hand out: never used plus cached (kept for reuse, no reference).
  int32_t n_free() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  int32_t n_used() const { return n_total() - n_free(); }
  int32_t n_cached() const { return static_cast<int32_t>(lru_.size()); }
  // Free blocks that hold nothing (never used, or freed unnamed): taking one evicts no
  // cached prefix. Likewise for companions.
  int32_t n_unused() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_sliding_unused() const { return static_cast<int32_t>(sw_free_.size()); }
  // Blocks holding reusable tokens (named full blocks and remembered partial ones), used
  // or cached, and the tokens in them.
  int32_t n_named() const { return n_named_; }
  int64_t named_tokens() const { return named_tokens_; }
  uint64_t evictions() const { return evictions_; }  // cached blocks reused for new tokens
  // Named blocks and their tokens per owner (the uid whose request named them).
  struct OwnerUsage {
    int32_t blocks = 0;
    int64_t tokens = 0;
  };
  const std::map<uint32_t, OwnerUsage>& owners() const { return owners_; }

  // Companions (see above): whether blocks have them, how many there are, and how many
  // are free or held by no table (cached).
  bool bounded_sliding() const { return !sw_.empty(); }
  int32_t n_sliding_total() const { return static_cast<int32_t>(sw_.size()); }
  int32_t n_sliding_free() const { return static_cast<int32_t>(sw_free_.size() + sw_lru_.size()); }
  uint64_t sliding_evictions() const { return sw_evictions_; }
  // The companion of `block` (the block of the smaller pool holding its sliding-window KV),
  // or -1.
  int32_t companion(int32_t block) const { return meta_[static_cast<size_t>(block)].companion; }
  // Gives a block (in use, without a companion) a new companion with one reference, taking
  // a free one or the least recently released cached one (its block then lacks its
  // sliding-window KV). Returns it, or -1 when every companion is held.
  int32_t add_companion(int32_t block);
  // allocate(), and with companions and `sliding` add_companion() too: a block for new KV
  // (computed, restored or copied), or -1 (nothing taken) when either is lacking. It goes
  // to a table with BlockTable::adopt(), or back with discard() when it was never written.
  int32_t allocate_for_kv(bool sliding = true);
  void discard(int32_t block);
  // Adds or drops one reference to the companion `block` has. At zero it stays with the
  // block while the block is named (cached), else it is freed; with `discard` (its
  // contents were never written) it is freed either way.
  void hold_companion(int32_t block);
  void release_companion(int32_t block, bool discard = false);

  // A block with one reference, or -1 when none is left. Takes a never-used block when
  // there is one, else the least recently released cached block (forgetting its name).
  int32_t allocate();
  void retain(int32_t block);
  // Drops one reference. At zero a named block is cached, an unnamed one freed.
  void release(int32_t block);
  int32_t refs(int32_t block) const { return meta_[static_cast<size_t>(block)].refs; }
  // The tokens a named block holds (empty when unnamed).
  const std::vector<int32_t>& tokens(int32_t block) const { return meta_[static_cast<size_t>(block)].tokens; }

  // The full block named `hash`, or -1.
  int32_t find(uint64_t hash) const;
  // Adds a reference to a block found by find() or best_child(); a cached block leaves
  // the reuse queue.
  void attach(int32_t block);
  // Names a full block (all block_tokens tokens computed; `tokens` are them). False, and
  // nothing changes, when another block already has this name, unless that block lacks
  // its sliding-window KV and this one does not: it is then unnamed (and freed when unused).
  // owner: the uid the block is charged to (see owners()).
  bool name_full(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, uint32_t owner = 0);
  // Remembers a partly filled block whose first tokens.size() slots hold valid KV.
  void name_partial(int32_t block, uint64_t parent, std::span<const int32_t> tokens, uint32_t owner = 0);
  // Whether a block lacks its sliding-window KV: it has no companion (restored with the KV
  // of its full-attention layers only, storage::Sections::kGlobal, or its companion was
  // reused). Such a block serves a prefix only where it lies outside the window of the
  // prefix's end, until a companion is added and written.
  bool sliding_missing(int32_t block) const {
    return bounded_sliding() && meta_[static_cast<size_t>(block)].companion < 0;
  }
  // Among the blocks following `parent` (full or partial), the one whose tokens share the
  // longest common prefix with `tokens`: {block, length}, or {-1, 0}. Blocks whose
  // sliding-window KV is missing are passed over: the block a prefix ends in is always
  // inside its window.
  std::pair<int32_t, int32_t> best_child(uint64_t parent, std::span<const int32_t> tokens) const;
  // Frees every cached block (or only those of one owner); names of blocks still in use
  // are kept. Returns how many.
  int32_t clear_cached(std::optional<uint32_t> owner = std::nullopt);

 private:
  struct Meta {
    int32_t refs = 0;
    bool named = false, full = false;
    uint64_t hash = 0, parent = 0;
    uint32_t owner = 0;
    int32_t companion = -1;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;        // valid while cached
    std::list<int32_t>::iterator owner_lru;  // in owner_lru_[owner], valid while cached
  };
  struct SlidingMeta {
    int32_t refs = 0;
    int32_t block = -1;                // whose companion it is, or -1 when free
    std::list<int32_t>::iterator lru;  // valid while cached
  };
  void unname(int32_t block);
  // A named block nobody holds enters / leaves the cached lists (lru_ and its owner's).
  void cache(int32_t block);
  void uncache(int32_t block);
  // The cached block a new block is taken from: the least recently released one of the
  // owner furthest past an equal share of the pool (the blocks over the owners with named
  // blocks), when that owner has cached blocks; else the least recently released one.
  int32_t eviction_victim() const;
  // Frees the companion of `block` (held by nobody), if it has one.
  void drop_companion(int32_t block);

  int32_t block_tokens_;
  std::vector<Meta> meta_;
  std::vector<int32_t> free_;                            // stack of never-used (or cleared) blocks, lowest id on top
  std::list<int32_t> lru_;                               // cached blocks, least recently released first
  std::map<uint32_t, std::list<int32_t>> owner_lru_;     // the same, by owner (no empty lists)
  std::unordered_map<uint64_t, int32_t> by_hash_;        // full named blocks
  std::unordered_multimap<uint64_t, int32_t> children_;  // parent hash -> named blocks
  int32_t n_named_ = 0;
  int64_t named_tokens_ = 0;
  std::map<uint32_t, OwnerUsage> owners_;
  uint64_t evictions_ = 0;
  std::vector<SlidingMeta> sw_;
  std::vector<int32_t> sw_free_;
  std::list<int32_t> sw_lru_;  // companions held by no table, least recently released first
  uint64_t sw_evictions_ = 0;
};

// One sequence's blocks, in position order, and the slot of each position it holds; with
// companions (BlockPool::bounded_sliding), also the companions it holds and the
// sliding-window layers' slot of each position whose block's companion it holds.
class BlockTable {
 public:
  // Makes room for positions [0, n_tokens), each new block with a companion when the pool
  // has them; false (nothing changed) when the pool runs out.
  bool reserve(BlockPool& pool, int32_t n_tokens);
  // Appends a block taken with BlockPool::attach (shared), holding its companion if it has
  // one; adopt() appends one from BlockPool::allocate_for_kv, taking over its references.
  // The table must end at a block boundary.
  void append(BlockPool& pool, int32_t block);
  void adopt(BlockPool& pool, int32_t block);
  // Returns every block to the pool, the last one first.
  void release(BlockPool& pool);
  // Returns the blocks from n_blocks on to the pool, the last one first.
  void truncate(BlockPool& pool, size_t n_blocks);

  // Whether block i's sliding-window KV can be read through sliding_slots(): the table
  // holds its companion (always, without companions).
  bool has_sliding(size_t i) const { return !bounded_ || held_[i] >= 0; }
  // Holds the companion block i has in the pool (false when it has none, or the table holds
  // it already).
  bool hold_sliding(BlockPool& pool, size_t i);
  // Gives block i (which has no companion) a new one and holds it; false when none is left.
  bool add_sliding(BlockPool& pool, size_t i);
  // Lets go of block i's companion (discard: its contents were never written, so it is
  // freed rather than kept with the block).
  void drop_sliding(BlockPool& pool, size_t i, bool discard);
  // Gives back the companions of the blocks before first_block: a sequence whose next
  // position is n attends in its sliding-window layers from n - window + 1 on only.
  void slide(BlockPool& pool, size_t first_block);

  int32_t capacity() const { return static_cast<int32_t>(slots_.size()); }  // tokens
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // slots()[p] = KV slot of position p, for p < capacity().
  const std::vector<int32_t>& slots() const { return slots_; }
  // The sliding-window layers' slot of each position: slots() without companions; with
  // them, the companion's slot where the table holds it, else 0 (never read: outside the
  // window of every position the sequence computes).
  const std::vector<int32_t>& sliding_slots() const { return bounded_ ? sw_slots_ : slots_; }

 private:
  void set_companion(size_t i, int32_t companion, int32_t block_tokens);
  void push(BlockPool& pool, int32_t block);

  bool bounded_ = false;
  size_t slid_ = 0;  // companions of blocks before it are given back
  std::vector<int32_t> blocks_;
  std::vector<int32_t> slots_;
  std::vector<int32_t> held_;  // with companions: the companion held for block i, or -1
  std::vector<int32_t> sw_slots_;
};

// The first block a sequence whose next position is n still attends to in a layer with a
// window of `window` positions (0: none, every block).
inline size_t first_window_block(int32_t n, int32_t window, int32_t block_tokens) {
  return window > 0 ? static_cast<size_t>(std::max(0, n - window + 1) / block_tokens) : 0;
}

}  // namespace hearth
