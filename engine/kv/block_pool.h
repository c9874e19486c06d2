// The KV cache as a pool of fixed-size blocks. Every layer's K and V tensors have
// n_blocks * block_tokens slots; block b owns slots [b * block_tokens, (b + 1) *
// block_tokens) in every layer. A sequence's BlockTable maps its positions to slots
// through the blocks it holds, so sequences take memory as they grow and give it back
// when they end, and the attention op reads through the position -> slot map.
//
// Blocks are reference-counted so that a block can later be shared by several sequences
// (prefix sharing, the prompt cache); today each block has one owner.
//
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hearth {

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int32_t block_tokens);

  int32_t block_tokens() const { return block_tokens_; }
  int32_t n_total() const { return static_cast<int32_t>(refs_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_used() const { return n_total() - n_free(); }

  // A free block with one reference, or -1 when none is left.
  int32_t allocate();
  void retain(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void release(int32_t block);
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  int32_t block_tokens_;
  std::vector<int32_t> refs_;  // per block
  std::vector<int32_t> free_;  // stack of free block ids (lowest id on top)
};

// One sequence's blocks, in position order, and the slot of each position it holds.
class BlockTable {
 public:
  // Makes room for positions [0, n_tokens); false (nothing changed) when the pool runs out.
  bool reserve(BlockPool& pool, int32_t n_tokens);
  // Returns every block to the pool.
  void release(BlockPool& pool);

  int32_t capacity() const { return static_cast<int32_t>(slots_.size()); }  // tokens
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // slots()[p] = KV slot of position p, for p < capacity().
  const std::vector<int32_t>& slots() const { return slots_; }

 private:
  std::vector<int32_t> blocks_;
  std::vector<int32_t> slots_;
};

}  // namespace hearth
