#include "engine/kv/block_pool.h"

#include <algorithm>
#include <cassert>

namespace hearth {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_tokens)
    : block_tokens_(block_tokens), meta_(static_cast<size_t>(n_blocks)) {
  assert(n_blocks > 0 && block_tokens > 0);
  free_.reserve(meta_.size());
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockPool::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    unname(b);
    ++evictions_;
  } else {
    return -1;
  }
  meta_[static_cast<size_t>(b)].refs = 1;
  meta_[static_cast<size_t>(b)].sliding_missing = false;
  return b;
}

void BlockPool::retain(int32_t block) {
  assert(meta_[static_cast<size_t>(block)].refs > 0);
  ++meta_[static_cast<size_t>(block)].refs;
}

void BlockPool::release(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(m.refs > 0);
  if (--m.refs > 0) return;
  if (m.named) {
    m.lru = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

int32_t BlockPool::find(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

void BlockPool::attach(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.refs == 0) lru_.erase(m.lru);
  ++m.refs;
}

bool BlockPool::name_full(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                          uint32_t owner) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(m.refs > 0 && static_cast<int32_t>(tokens.size()) == block_tokens_);
  if (m.named) return false;
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {
    // A block holding the name without its sliding-window KV gives the name up to a whole
    // one: otherwise a prefix that needs that KV and cannot read it from disk would be
    // computed again every time.
    const int32_t old = it->second;
    Meta& o = meta_[static_cast<size_t>(old)];
    if (!o.sliding_missing || m.sliding_missing) return false;
    const int32_t refs = o.refs;
    if (refs == 0) lru_.erase(o.lru);
    unname(old);
    meta_[static_cast<size_t>(old)].refs = refs;
    meta_[static_cast<size_t>(old)].sliding_missing = true;  // still, for the tables holding it
    if (refs == 0) free_.push_back(old);
  }
  m.named = m.full = true;
  m.hash = hash;
  m.parent = parent;
  m.tokens.assign(tokens.begin(), tokens.end());
  m.owner = owner;
  by_hash_.emplace(hash, block);
  children_.emplace(parent, block);
  ++n_named_;
  named_tokens_ += block_tokens_;
  OwnerUsage& u = owners_[owner];
  ++u.blocks;
  u.tokens += block_tokens_;
  return true;
}

void BlockPool::name_partial(int32_t block, uint64_t parent, std::span<const int32_t> tokens, uint32_t owner) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(m.refs > 0 && static_cast<int32_t>(tokens.size()) < block_tokens_);
  if (m.named || tokens.empty()) return;
  m.named = true;
  m.full = false;
  m.parent = parent;
  m.owner = owner;
  m.tokens.assign(tokens.begin(), tokens.end());
  children_.emplace(parent, block);
  ++n_named_;
  named_tokens_ += static_cast<int64_t>(tokens.size());
  OwnerUsage& u = owners_[owner];
  ++u.blocks;
  u.tokens += static_cast<int64_t>(tokens.size());
}

std::pair<int32_t, int32_t> BlockPool::best_child(uint64_t parent, std::span<const int32_t> tokens) const {
  std::pair<int32_t, int32_t> best{-1, 0};
  auto [lo, hi] = children_.equal_range(parent);
  for (auto it = lo; it != hi; ++it) {
    if (meta_[static_cast<size_t>(it->second)].sliding_missing) continue;
    const std::vector<int32_t>& t = meta_[static_cast<size_t>(it->second)].tokens;
    const size_t n = std::min(t.size(), tokens.size());
    const int32_t common = static_cast<int32_t>(
        std::mismatch(t.begin(), t.begin() + static_cast<ptrdiff_t>(n), tokens.begin()).first - t.begin());
    if (common > best.second) best = {it->second, common};
  }
  return best;
}

void BlockPool::unname(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (!m.named) return;
  if (m.full) by_hash_.erase(m.hash);
  auto [lo, hi] = children_.equal_range(m.parent);
  for (auto it = lo; it != hi; ++it)
    if (it->second == block) {
      children_.erase(it);
      break;
    }
  --n_named_;
  named_tokens_ -= static_cast<int64_t>(m.tokens.size());
  if (auto o = owners_.find(m.owner); o != owners_.end()) {
    --o->second.blocks;
    o->second.tokens -= static_cast<int64_t>(m.tokens.size());
    if (o->second.blocks == 0) owners_.erase(o);
  }
  m = Meta{};
}

int32_t BlockPool::clear_cached(std::optional<uint32_t> owner) {
  int32_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const int32_t b = *it;
    if (owner && meta_[static_cast<size_t>(b)].owner != *owner) {
      ++it;
      continue;
    }
    unname(b);
    free_.push_back(b);
    it = lru_.erase(it);
    ++n;
  }
  return n;
}

bool BlockTable::reserve(BlockPool& pool, int32_t n_tokens) {
  const int32_t bt = pool.block_tokens();
  const size_t need = static_cast<size_t>((n_tokens + bt - 1) / bt);
  if (need <= blocks_.size()) return true;
  if (static_cast<size_t>(pool.n_free()) < need - blocks_.size()) return false;
  while (blocks_.size() < need) append(pool.allocate(), bt);
  return true;
}

void BlockTable::append(int32_t block, int32_t block_tokens) {
  assert(slots_.size() == blocks_.size() * static_cast<size_t>(block_tokens));
  blocks_.push_back(block);
  for (int32_t i = 0; i < block_tokens; ++i) slots_.push_back(block * block_tokens + i);
}

void BlockTable::release(BlockPool& pool) {
  truncate(pool, 0);
}

void BlockTable::truncate(BlockPool& pool, size_t n_blocks) {
  if (n_blocks >= blocks_.size()) return;
  for (size_t i = blocks_.size(); i-- > n_blocks;) pool.release(blocks_[i]);
  blocks_.resize(n_blocks);
  slots_.resize(n_blocks * static_cast<size_t>(pool.block_tokens()));
}

}  // namespace hearth
