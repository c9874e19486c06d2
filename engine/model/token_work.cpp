#include "engine/model/token_work.h"

#include <string>

namespace hearth {
namespace {

// The share of a mixture-of-experts stack ("blk.N.ffn_*_exps.weight", [n_in, n_out,
// n_expert]) one token uses: expert_used_count / expert_count; 1 for any other tensor, or
// when the file's counts are missing or out of range (then the whole stack is counted).
double active_share(const gguf::File& f, const gguf::TensorInfo& t) {
  const std::string& n = t.name;
  const std::string suffix = "_exps.weight";
  if (t.n_dims != 3 || n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
    return 1.0;
  Result<std::string_view> arch = f.get_string("general.architecture");
  if (!arch) return 1.0;
  const std::string a(*arch);
  Result<uint64_t> n_expert = f.get_uint(a + ".expert_count"), n_used = f.get_uint(a + ".expert_used_count");
  if (!n_expert || !n_used || *n_expert == 0 || *n_used > *n_expert || static_cast<uint64_t>(t.ne[2]) != *n_expert)
    return 1.0;
  return static_cast<double>(*n_used) / static_cast<double>(*n_expert);
}

}  // namespace

TokenWork token_work(const gguf::File& f) {
  TokenWork w;
  bool has_output = false;
  for (const gguf::TensorInfo& t : f.tensors()) has_output |= t.name == "output.weight";
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.n_dims < 2) continue;
    const bool embd = t.name == "token_embd.weight", out = t.name == "output.weight";
    const double share = active_share(f, t);
    if (!embd && !out) w.prefill_ops += 2.0 * static_cast<double>(t.n_elements()) * share;
    if (!embd || !has_output) w.decode_bytes += static_cast<double>(t.n_bytes) * share;
  }
  return w;
}

}  // namespace hearth
