// The names of KV blocks: a hash chain over token ids. Block i of a sequence is named
//   h_i = H(h_{i-1}, tokens of block i),   h_{-1} = root,
// so a name stands for every token before it too, and two prompts share the names of the
// blocks they have in common. The root is scope_root(seed, scope): the seed binds the chain
// to one model file (its content fingerprint), one KV dtype and layout, one chunk format
// version and one version of the backends' arithmetic (kNumericsVersion), so KV of another
// model or dtype, or computed by older kernels, can never be looked up; the scope binds
// it to one user, group or salt. H is XXH3-64 seeded with the parent. Collisions are
// possible in principle; every user of a name also compares the token ids.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace hearth {

uint64_t prefix_seed(std::string_view model_fingerprint, uint32_t kv_dtype, uint32_t n_layer, uint32_t kv_dim,
                     uint32_t format_version, uint32_t numerics_version);
// The root of one cache scope's chains: H(seed, scope key); the seed itself for the empty
// key. Never 0. Two scopes' chains share no name, so neither tier can serve one from the other.
uint64_t scope_root(uint64_t seed, std::string_view scope_key);
// Never 0 (0 means "no parent" in the chunk index).
uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens);

}  // namespace hearth
