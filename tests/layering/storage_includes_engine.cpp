// Compiled with only the storage layer's include root: storage is below the engine.
#include "engine/kv/block_pool.h"
#include "storage/chunk_store.h"

int main() {
  return 0;
}
