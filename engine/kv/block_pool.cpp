#include "engine/kv/block_pool.h"

#include <cassert>

namespace hearth {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_tokens)
    : block_tokens_(block_tokens), refs_(static_cast<size_t>(n_blocks), 0) {
  assert(n_blocks > 0 && block_tokens > 0);
  free_.reserve(refs_.size());
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::retain(int32_t block) {
  assert(refs_[static_cast<size_t>(block)] > 0);
  ++refs_[static_cast<size_t>(block)];
}

void BlockPool::release(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  assert(r > 0);
  if (--r == 0) free_.push_back(block);
}

bool BlockTable::reserve(BlockPool& pool, int32_t n_tokens) {
  const int32_t bt = pool.block_tokens();
  const size_t need = static_cast<size_t>((n_tokens + bt - 1) / bt);
  if (need <= blocks_.size()) return true;
  if (static_cast<size_t>(pool.n_free()) < need - blocks_.size()) return false;
  while (blocks_.size() < need) {
    const int32_t b = pool.allocate();
    blocks_.push_back(b);
    for (int32_t i = 0; i < bt; ++i) slots_.push_back(b * bt + i);
  }
  return true;
}

void BlockTable::release(BlockPool& pool) {
  for (int32_t b : blocks_) pool.release(b);
  blocks_.clear();
  slots_.clear();
}

}  // namespace hearth
