#include "engine/kv/prefix_hash.h"

#include <xxhash.h>

#include <string>

namespace hearth {

uint64_t prefix_seed(std::string_view model_fingerprint, uint32_t kv_dtype, uint32_t n_layer, uint32_t kv_dim,
                     uint32_t format_version, uint32_t numerics_version) {
  std::string key = "hearth-kv\n";
  key += model_fingerprint;
  for (uint32_t v : {kv_dtype, n_layer, kv_dim, format_version, numerics_version}) {
    key += '\n';
    key += std::to_string(v);
  }
  const uint64_t h = XXH3_64bits(key.data(), key.size());
  return h == 0 ? 1 : h;
}

uint64_t scope_root(uint64_t seed, std::string_view scope_key) {
  if (scope_key.empty()) return seed;
  const uint64_t h = XXH3_64bits_withSeed(scope_key.data(), scope_key.size(), seed);
  return h == 0 ? 1 : h;
}

uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  const uint64_t h = XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
  return h == 0 ? 1 : h;
}

}  // namespace hearth
