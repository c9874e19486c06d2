#include "engine/kv/block_pool.h"

#include <algorithm>
#include <cassert>

namespace hearth {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_tokens, int32_t n_sliding_blocks)
    : block_tokens_(block_tokens), meta_(static_cast<size_t>(n_blocks)), sw_(static_cast<size_t>(n_sliding_blocks)) {
  assert(n_blocks > 0 && block_tokens > 0 && n_sliding_blocks >= 0);
  free_.reserve(meta_.size());
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
  for (int32_t c = n_sliding_blocks - 1; c >= 0; --c) sw_free_.push_back(c);
}

int32_t BlockPool::add_companion(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(bounded_sliding() && m.refs > 0 && m.companion < 0);
  int32_t c = -1;
  if (!sw_free_.empty()) {
    c = sw_free_.back();
    sw_free_.pop_back();
  } else if (!sw_lru_.empty()) {
    c = sw_lru_.front();
    sw_lru_.pop_front();
    meta_[static_cast<size_t>(sw_[static_cast<size_t>(c)].block)].companion = -1;
    ++sw_evictions_;
  } else {
    return -1;
  }
  sw_[static_cast<size_t>(c)] = SlidingMeta{1, block, {}};
  m.companion = c;
  return c;
}

void BlockPool::hold_companion(int32_t block) {
  const int32_t c = meta_[static_cast<size_t>(block)].companion;
  assert(c >= 0);
  SlidingMeta& s = sw_[static_cast<size_t>(c)];
  if (s.refs++ == 0) sw_lru_.erase(s.lru);
}

void BlockPool::release_companion(int32_t block, bool discard) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(m.companion >= 0);
  SlidingMeta& s = sw_[static_cast<size_t>(m.companion)];
  assert(s.refs > 0 && (!discard || s.refs == 1));
  if (--s.refs > 0) return;
  if (m.named && !discard) {
    s.lru = sw_lru_.insert(sw_lru_.end(), m.companion);
  } else {
    sw_free_.push_back(m.companion);
    s = SlidingMeta{};
    m.companion = -1;
  }
}

void BlockPool::drop_companion(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.companion < 0) return;
  SlidingMeta& s = sw_[static_cast<size_t>(m.companion)];
  assert(s.refs == 0);
  sw_lru_.erase(s.lru);
  sw_free_.push_back(m.companion);
  s = SlidingMeta{};
  m.companion = -1;
}

int32_t BlockPool::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = eviction_victim();
    uncache(b);
    unname(b);
    ++evictions_;
  } else {
    return -1;
  }
  assert(meta_[static_cast<size_t>(b)].companion < 0);
  meta_[static_cast<size_t>(b)].refs = 1;
  return b;
}

int32_t BlockPool::allocate_for_kv(bool sliding) {
  const bool companion = sliding && bounded_sliding();
  if (n_free() < 1 || (companion && n_sliding_free() < 1)) return -1;
  const int32_t b = allocate();
  if (companion) add_companion(b);  // cannot fail: allocate() frees companions, never takes one
  return b;
}

void BlockPool::discard(int32_t block) {
  if (meta_[static_cast<size_t>(block)].companion >= 0) release_companion(block, true);
  release(block);
}

void BlockPool::retain(int32_t block) {
  assert(meta_[static_cast<size_t>(block)].refs > 0);
  ++meta_[static_cast<size_t>(block)].refs;
}

void BlockPool::release(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  assert(m.refs > 0);
  if (--m.refs > 0) return;
  assert(m.companion < 0 || sw_[static_cast<size_t>(m.companion)].refs == 0);  // tables let go of it first
  if (m.named) {
    cache(block);
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
  if (m.refs == 0) uncache(block);
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
    if (!sliding_missing(old) || sliding_missing(block)) return false;
    const int32_t refs = o.refs;
    if (refs == 0) uncache(old);
    unname(old);
    meta_[static_cast<size_t>(old)].refs = refs;
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
    if (sliding_missing(it->second)) continue;
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
  // A companion nobody holds goes with the name (one still held is freed when let go).
  if (m.companion >= 0 && sw_[static_cast<size_t>(m.companion)].refs == 0) drop_companion(block);
  const int32_t companion = m.companion;
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
  m.companion = companion;
}

int32_t BlockPool::clear_cached(std::optional<uint32_t> owner) {
  int32_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const int32_t b = *it++;
    if (owner && meta_[static_cast<size_t>(b)].owner != *owner) continue;
    uncache(b);
    unname(b);
    free_.push_back(b);
    ++n;
  }
  return n;
}

void BlockPool::cache(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  m.lru = lru_.insert(lru_.end(), block);
  std::list<int32_t>& mine = owner_lru_[m.owner];
  m.owner_lru = mine.insert(mine.end(), block);
}

void BlockPool::uncache(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  lru_.erase(m.lru);
  auto it = owner_lru_.find(m.owner);
  assert(it != owner_lru_.end());
  it->second.erase(m.owner_lru);
  if (it->second.empty()) owner_lru_.erase(it);
}

int32_t BlockPool::eviction_victim() const {
  assert(!lru_.empty());
  if (owners_.size() > 1) {
    const int32_t share = n_total() / static_cast<int32_t>(owners_.size());
    int32_t furthest = 0;
    const std::list<int32_t>* victims = nullptr;
    for (const auto& [owner, usage] : owners_) {
      const auto cached = owner_lru_.find(owner);
      if (usage.blocks - share > furthest && cached != owner_lru_.end()) {
        furthest = usage.blocks - share;
        victims = &cached->second;
      }
    }
    if (victims) return victims->front();
  }
  return lru_.front();
}

bool BlockTable::reserve(BlockPool& pool, int32_t n_tokens) {
  const int32_t bt = pool.block_tokens();
  const size_t need = static_cast<size_t>((n_tokens + bt - 1) / bt);
  if (need <= blocks_.size()) return true;
  const int32_t more = static_cast<int32_t>(need - blocks_.size());
  if (pool.n_free() < more || (pool.bounded_sliding() && pool.n_sliding_free() < more)) return false;
  while (blocks_.size() < need) adopt(pool, pool.allocate_for_kv());
  return true;
}

void BlockTable::set_companion(size_t i, int32_t companion, int32_t block_tokens) {
  held_[i] = companion;
  const size_t bt = static_cast<size_t>(block_tokens);
  for (size_t k = 0; k < bt; ++k)
    sw_slots_[i * bt + k] = companion < 0 ? 0 : companion * block_tokens + static_cast<int32_t>(k);
}

void BlockTable::push(BlockPool& pool, int32_t block) {
  const int32_t bt = pool.block_tokens();
  assert(slots_.size() == blocks_.size() * static_cast<size_t>(bt));
  if (blocks_.empty()) bounded_ = pool.bounded_sliding();
  blocks_.push_back(block);
  for (int32_t i = 0; i < bt; ++i) slots_.push_back(block * bt + i);
  if (!bounded_) return;
  held_.push_back(-1);
  sw_slots_.resize(slots_.size(), 0);
}

void BlockTable::append(BlockPool& pool, int32_t block) {
  push(pool, block);
  hold_sliding(pool, blocks_.size() - 1);
}

void BlockTable::adopt(BlockPool& pool, int32_t block) {
  push(pool, block);
  if (bounded_ && pool.companion(block) >= 0)
    set_companion(blocks_.size() - 1, pool.companion(block), pool.block_tokens());
}

bool BlockTable::hold_sliding(BlockPool& pool, size_t i) {
  if (!bounded_ || held_[i] >= 0) return false;
  const int32_t c = pool.companion(blocks_[i]);
  if (c < 0) return false;
  pool.hold_companion(blocks_[i]);
  set_companion(i, c, pool.block_tokens());
  slid_ = std::min(slid_, i);
  return true;
}

void BlockTable::drop_sliding(BlockPool& pool, size_t i, bool discard) {
  if (!bounded_ || held_[i] < 0) return;
  pool.release_companion(blocks_[i], discard);
  set_companion(i, -1, pool.block_tokens());
}

bool BlockTable::add_sliding(BlockPool& pool, size_t i) {
  if (!bounded_ || held_[i] >= 0 || pool.companion(blocks_[i]) >= 0) return false;
  const int32_t c = pool.add_companion(blocks_[i]);
  if (c < 0) return false;
  set_companion(i, c, pool.block_tokens());
  slid_ = std::min(slid_, i);
  return true;
}

void BlockTable::slide(BlockPool& pool, size_t first_block) {
  if (!bounded_) return;
  for (; slid_ < std::min(first_block, blocks_.size()); ++slid_) drop_sliding(pool, slid_, false);
}

void BlockTable::release(BlockPool& pool) {
  truncate(pool, 0);
}

void BlockTable::truncate(BlockPool& pool, size_t n_blocks) {
  if (n_blocks >= blocks_.size()) return;
  for (size_t i = blocks_.size(); i-- > n_blocks;) {
    if (bounded_ && held_[i] >= 0) pool.release_companion(blocks_[i]);
    pool.release(blocks_[i]);
  }
  blocks_.resize(n_blocks);
  slots_.resize(n_blocks * static_cast<size_t>(pool.block_tokens()));
  if (!bounded_) return;
  held_.resize(n_blocks);
  sw_slots_.resize(slots_.size());
  slid_ = std::min(slid_, n_blocks);
}

}  // namespace hearth
