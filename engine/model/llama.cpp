// Llama (general.architecture = "llama"): Llama 2/3, TinyLlama, SmolLM and the like.
//
// Block (build_llama_block): RMSNorm -> Q, K, V (+ biases, when the file has them) -> RoPE
// (normal layout: the converter permuted Q and K for it) -> attention (grouped-query,
// causal) -> output projection -> residual add -> RMSNorm -> SiLU(gate) x up -> down ->
// residual add. The output projection is output.weight, or the embedding table when the
// file has none (tied).
#include "engine/model/architecture.h"

namespace hearth {
namespace {

class Llama final : public Architecture {
 public:
  Status read_config(const gguf::File& f, ModelConfig& c) const override {
    if (Status s = read_common_config(f, c); !s) return s;
    c.rope_layout = kRopeNormal;
    c.rope_base_swa = c.rope_base;
    return {};
  }

  Status bind_weights(const WeightBinder& b, const ModelConfig& c, ModelWeights& w) const override {
    Status s;
    if (!(s = b.bind_embeddings(c, w)) || !(s = b.bind_blocks(c, w))) return s;
    return b.bind_qkv_biases(c, w, /*required=*/false);
  }

  void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int, const BatchLayout& b,
                   const Activations& a, const Tensor& k_cache, const Tensor& v_cache) const override {
    build_llama_block(g, c, w, b, a, k_cache, v_cache);
  }
};

}  // namespace

void build_llama_attention(Graph& g, const ModelConfig& c, const LayerWeights& w, const BatchLayout& b,
                           const Activations& a, const Tensor& k_cache, const Tensor& v_cache) {
  using namespace ops;
  const int64_t n = b.n;
  const Tensor x = rows(a.x, n), cur = rows(a.cur, n), tmp = rows(a.tmp, n);
  const Tensor q = rows(a.q, n), k = rows(a.k, n), v = rows(a.v, n), attn = rows(a.attn, n);

  rms_norm(g, cur, x, w.attn_norm, c.rms_eps);
  matmul(g, q, w.wq, cur);
  matmul(g, k, w.wk, cur);
  matmul(g, v, w.wv, cur);
  if (w.bq.valid()) {
    add_row(g, q, q, w.bq);
    add_row(g, k, k, w.bk);
    add_row(g, v, v, w.bv);
  }
  if (w.q_norm.valid()) {  // qwen3: per head, the weights are head_dim long
    rms_norm(g, q, q, w.q_norm, c.rms_eps);
    rms_norm(g, k, k, w.k_norm, c.rms_eps);
  }
  rope(g, q, b.positions, c.head_dim, c.n_rot, c.rope_layout, c.rope_base, c.rope_pos_scale);
  rope(g, k, b.positions, c.head_dim, c.n_rot, c.rope_layout, c.rope_base, c.rope_pos_scale);
  store_kv(g, k, v, k_cache, v_cache, b.new_slots);
  attention(g, attn, q, k_cache, v_cache, b, c, 0);
  matmul(g, tmp, w.wo, attn);
  add(g, x, x, tmp);
}

void build_llama_block(Graph& g, const ModelConfig& c, const LayerWeights& w, const BatchLayout& b,
                       const Activations& a, const Tensor& k_cache, const Tensor& v_cache) {
  using namespace ops;
  build_llama_attention(g, c, w, b, a, k_cache, v_cache);
  const int64_t n = b.n;
  const Tensor x = rows(a.x, n), cur = rows(a.cur, n), tmp = rows(a.tmp, n);
  const Tensor gate = rows(a.gate, n), up = rows(a.up, n);
  rms_norm(g, cur, x, w.ffn_norm, c.rms_eps);
  matmul(g, gate, w.ffn_gate, cur);
  matmul(g, up, w.ffn_up, cur);
  gated(g, OpKind::SiluMul, gate, gate, up);
  matmul(g, tmp, w.ffn_down, gate);
  add(g, x, x, tmp);
}

const Architecture& llama_architecture() {
  static const Llama arch;
  return arch;
}

}  // namespace hearth
