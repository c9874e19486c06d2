// Gemma 3 (general.architecture = "gemma3").
//
// Block: RMSNorm -> Q, K, V -> per-head RMSNorm of Q and K -> RoPE (NEOX layout; sliding
// layers use their own base) -> attention (grouped-query; sliding window on all but every
// 6th layer) -> output projection -> RMSNorm (post-attention) -> residual add -> RMSNorm ->
// GELU(tanh)(gate) x up -> down -> RMSNorm (post-FFN) -> residual add.
// Embeddings are scaled by sqrt(n_embd); the output projection is tied to them unless the
// file has output.weight. The converter stores norm weights as (1 + w) already.
#include <cmath>

#include "engine/model/architecture.h"

namespace hearth {
namespace {

// Every kSwaPeriod-th layer (1-based) attends globally; the others use the window.
// Gemma 3's files carry the window size but not this period, which the family fixes.
constexpr int kSwaPeriod = 6;

class Gemma3 final : public Architecture {
 public:
  Status read_config(const gguf::File& f, ModelConfig& c) const override {
    if (Status s = read_common_config(f, c); !s) return s;
    c.rope_layout = kRopeNeox;
    Result<uint64_t> window = f.get_uint_or("gemma3.attention.sliding_window", 0);
    if (!window) return window.error();
    if (*window > (1u << 24)) return make_error("model: gemma3.attention.sliding_window out of range");
    c.sliding_window = static_cast<int32_t>(*window);
    Result<uint64_t> period = f.get_uint_or("gemma3.attention.sliding_window_pattern", kSwaPeriod);
    if (!period) return period.error();
    for (int il = 0; il < c.n_layer; ++il)
      c.layer_swa[il] = c.sliding_window > 0 && *period > 0 && (il + 1) % static_cast<int>(*period) != 0;
    Result<double> base_swa = f.get_float_or("gemma3.rope.freq_base_swa", 10000.0);
    if (!base_swa) return base_swa.error();
    c.rope_base_swa = static_cast<float>(*base_swa);
    c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
    return {};
  }

  Status bind_weights(const WeightBinder& b, const ModelConfig& c, ModelWeights& w) const override {
    Status s;
    if (!(s = b.bind_embeddings(c, w)) || !(s = b.bind_blocks(c, w)) || !(s = b.bind_qk_norms(c, w))) return s;
    // Gemma's extra norms after each sub-block.
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      LayerWeights& l = w.layers[il];
      if (!(s = b.bind(p + "post_attention_norm.weight", c.n_embd, 1, l.post_attn_norm))) return s;
      if (!(s = b.bind(p + "post_ffw_norm.weight", c.n_embd, 1, l.post_ffn_norm))) return s;
    }
    return {};
  }

  void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int il, const BatchLayout& b,
                   const Activations& a, const Tensor& k_cache, const Tensor& v_cache) const override {
    using namespace ops;
    const int64_t n = b.n;
    const Tensor x = rows(a.x, n), cur = rows(a.cur, n), tmp = rows(a.tmp, n);
    const Tensor q = rows(a.q, n), k = rows(a.k, n), v = rows(a.v, n), attn = rows(a.attn, n);
    const Tensor gate = rows(a.gate, n), up = rows(a.up, n);
    const bool swa = c.layer_swa[il];

    rms_norm(g, cur, x, w.attn_norm, c.rms_eps);
    matmul(g, q, w.wq, cur);
    matmul(g, k, w.wk, cur);
    matmul(g, v, w.wv, cur);
    rms_norm(g, q, q, w.q_norm, c.rms_eps);  // per head: the weight is head_dim long
    rms_norm(g, k, k, w.k_norm, c.rms_eps);
    rope(g, q, b.positions, c.head_dim, c.n_rot, c.rope_layout, swa ? c.rope_base_swa : c.rope_base,
         swa ? 1.0f : c.rope_pos_scale);
    rope(g, k, b.positions, c.head_dim, c.n_rot, c.rope_layout, swa ? c.rope_base_swa : c.rope_base,
         swa ? 1.0f : c.rope_pos_scale);
    store_kv(g, k, v, k_cache, v_cache, b.new_slots);
    attention(g, attn, q, k_cache, v_cache, b, c, swa ? c.sliding_window : 0);
    matmul(g, tmp, w.wo, attn);
    rms_norm(g, tmp, tmp, w.post_attn_norm, c.rms_eps);
    add(g, x, x, tmp);

    rms_norm(g, cur, x, w.ffn_norm, c.rms_eps);
    matmul(g, gate, w.ffn_gate, cur);
    matmul(g, up, w.ffn_up, cur);
    gated(g, OpKind::GeluMul, gate, gate, up);
    matmul(g, tmp, w.ffn_down, gate);
    rms_norm(g, tmp, tmp, w.post_ffn_norm, c.rms_eps);
    add(g, x, x, tmp);
  }
};

}  // namespace

const Architecture& gemma3_architecture() {
  static const Gemma3 arch;
  return arch;
}

}  // namespace hearth
