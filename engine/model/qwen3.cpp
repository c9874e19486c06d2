// Qwen3 dense (general.architecture = "qwen3"): Qwen3 0.6B to 32B.
//
// The Llama block (build_llama_block) with Qwen2's NEOX RoPE and large base
// (qwen3.rope.freq_base; 1e6), no Q/K/V biases, and a per-head RMSNorm of Q and K
// (blk.N.attn_q_norm / attn_k_norm, head_dim long, required) between the projections and
// RoPE. The head width is qwen3.attention.key_length, which need not be n_embd / n_head
// (Qwen3-0.6B: 16 heads of 128 over a 1024-wide stream). The output projection is
// output.weight, or the embedding table when the file has none (tied, as in the small ones).
#include "engine/model/architecture.h"

namespace hearth {
namespace {

class Qwen3 final : public Architecture {
 public:
  Status read_config(const gguf::File& f, ModelConfig& c) const override {
    if (Status s = read_common_config(f, c); !s) return s;
    c.rope_layout = kRopeNeox;
    c.rope_base_swa = c.rope_base;
    return {};
  }

  Status bind_weights(const WeightBinder& b, const ModelConfig& c, ModelWeights& w) const override {
    Status s;
    if (!(s = b.bind_embeddings(c, w)) || !(s = b.bind_blocks(c, w))) return s;
    return b.bind_qk_norms(c, w);
  }

  void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int, const BatchLayout& b,
                   const Activations& a, const Tensor& k_cache, const Tensor& v_cache) const override {
    build_llama_block(g, c, w, b, a, k_cache, v_cache);
  }
};

}  // namespace

const Architecture& qwen3_architecture() {
  static const Qwen3 arch;
  return arch;
}

}  // namespace hearth
