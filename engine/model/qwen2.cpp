// Qwen2 (general.architecture = "qwen2"): Qwen1.5, Qwen2, Qwen2.5 and Qwen2.5-Coder.
//
// The Llama block (build_llama_block) with two differences: Q, K and V have biases
// (blk.N.attn_q/k/v.bias, F32, required), and RoPE rotates in the NEOX layout (pairs
// (j, j + n_rot/2): the converter does not permute Q and K for qwen2) with the file's
// base (qwen2.rope.freq_base; 1e6 for Qwen2.5). The output projection is output.weight,
// or the embedding table when the file has none (the smaller Qwen2.5 models tie them).
#include "engine/model/architecture.h"

namespace hearth {
namespace {

class Qwen2 final : public Architecture {
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
    return b.bind_qkv_biases(c, w, /*required=*/true);
  }

  void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int, const BatchLayout& b,
                   const Activations& a, const Tensor& k_cache, const Tensor& v_cache) const override {
    build_llama_block(g, c, w, b, a, k_cache, v_cache);
  }
};

}  // namespace

const Architecture& qwen2_architecture() {
  static const Qwen2 arch;
  return arch;
}

}  // namespace hearth
