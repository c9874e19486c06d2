#include "engine/scheduler/kv_store.h"

#include <algorithm>

namespace hearth {

storage::KvFormat kv_format(const ModelConfig& c, DType kv_type, const std::string& fingerprint) {
  storage::KvFormat f;
  f.model_fingerprint = fingerprint;
  f.kv_dtype = static_cast<uint32_t>(kv_type);
  f.n_layer = static_cast<uint32_t>(c.n_layer);
  f.kv_dim = static_cast<uint32_t>(c.kv_dim());
  f.row_bytes = static_cast<uint32_t>(row_bytes(kv_type, c.kv_dim()));
  f.n_sliding = static_cast<uint32_t>(c.n_sliding_layers());
  return f;
}

Result<std::unique_ptr<storage::ChunkStore>> open_kv_store(const ModelConfig& c, DType kv_type,
                                                           const std::string& fingerprint, const std::string& dir,
                                                           uint64_t max_bytes, uint64_t user_max_bytes,
                                                           bool reconcile) {
  storage::StoreOptions so;
  so.dir = dir;
  so.max_bytes = max_bytes;
  so.user_max_bytes = user_max_bytes;
  so.reconcile = reconcile;
  return storage::ChunkStore::open(so, kv_format(c, kv_type, fingerprint));
}

}  // namespace hearth
