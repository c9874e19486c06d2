#include "engine/model/token_work.h"

namespace hearth {

TokenWork token_work(const gguf::File& f) {
  TokenWork w;
  bool has_output = false;
  for (const gguf::TensorInfo& t : f.tensors()) has_output |= t.name == "output.weight";
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.n_dims < 2) continue;
    const bool embd = t.name == "token_embd.weight", out = t.name == "output.weight";
    if (!embd && !out) w.prefill_ops += 2.0 * static_cast<double>(t.n_elements());
    if (!embd || !has_output) w.decode_bytes += static_cast<double>(t.n_bytes);
  }
  return w;
}

}  // namespace hearth
