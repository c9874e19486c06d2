// libFuzzer entry point for the GGUF reader. Build with clang++ -DHEARTH_FUZZ=ON; run
// ./gguf_fuzz -max_total_time=60 [corpus_dir].
#include <cstddef>
#include <cstdint>

#include "engine/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::gguf;
  auto r = File::from_memory(data, size);
  if (!r.ok()) return 0;
  const File& f = **r;
  for (const std::string& k : f.keys()) {
    (void)f.get_string(k);
    (void)f.get_uint(k);
    (void)f.get_int(k);
    (void)f.get_float(k);
    (void)f.get_bool(k);
    (void)f.get_string_array(k);
    (void)f.get_f32_array(k);
    (void)f.get_int_array(k);
  }
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.data < f.base() || t.data + t.n_bytes > f.base() + f.size()) __builtin_trap();
    sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
  }
  return 0;
}
