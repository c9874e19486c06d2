// The disk tier of the prompt cache for one model: a storage::ChunkStore whose chunk
// format is that model's KV shape and type. Its owner (the daemon, a test) opens it and
// hands it to Scheduler::create, which checks that it fits the model and options.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "engine/model/model.h"
#include "storage/chunk_store.h"

namespace hearth {

// The chunk format of a model's KV in kv_type, for the weights file `fingerprint` names.
storage::KvFormat kv_format(const ModelConfig& c, DType kv_type, const std::string& fingerprint);

// Opens (creating) the store under dir, at most max_bytes on disk and user_max_bytes a user
// (0: fair shares only); reconcile as in storage::StoreOptions (false while another store
// of this process writes there).
Result<std::unique_ptr<storage::ChunkStore>> open_kv_store(const ModelConfig& c, DType kv_type,
                                                           const std::string& fingerprint, const std::string& dir,
                                                           uint64_t max_bytes, uint64_t user_max_bytes = 0,
                                                           bool reconcile = true);

}  // namespace hearth
