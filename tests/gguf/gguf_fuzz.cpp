// libFuzzer entry point for the GGUF reader. Build with clang++ -DHEARTH_FUZZ=ON; run
// ./gguf_fuzz -max_total_time=60 [corpus_dir].
#include <cstddef>
#include <cstdint>

#include "engine/gguf/gguf.h"
#include "gguf_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::gguf;
  auto r = File::from_memory(data, size);
  if (!r.ok()) return 0;
  const File& f = **r;
  hearth::gguf::test::read_every_value(f);
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.data < f.base() || t.data + t.n_bytes > f.base() + f.size()) __builtin_trap();
    sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
  }
  return 0;
}
