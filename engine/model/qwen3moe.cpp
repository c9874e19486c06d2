// Qwen3-MoE (general.architecture = "qwen3moe"): Qwen3-30B-A3B, Qwen3-235B-A22B.
//
// Qwen3's attention (qwen3.cpp: per-head Q/K RMSNorm, NEOX RoPE) and, in place of the dense
// FFN, a mixture of experts (llama.cpp: build_moe_ffn with softmax gating and normalised
// weights, as LLM_ARCH_QWEN3MOE calls it):
//   p      = softmax(ffn_gate_inp x)                       router, [n_expert]
//   E, w   = the k = expert_used_count most probable experts, w_j = p_j / max(sum p, 2^-14)
//   h_j    = SiLU(gate_exps[E_j] x) * up_exps[E_j] x       [n_ff_exp] per chosen expert
//   ffn(x) = sum_j w_j * down_exps[E_j] h_j                 in rank order
// Keys: qwen3moe.expert_count, expert_used_count, expert_feed_forward_length (llama.cpp's
// default when absent: feed_forward_length / expert_used_count), expert_weights_scale
// (optional; absent or 0 means 1). Only the chosen experts' rows are read (MatMulExperts).
#include <cmath>
#include <string>

#include "engine/model/architecture.h"

namespace hearth {
namespace {

// The clamp of the renormalising sum: llama.cpp's, the smallest normal f16.
constexpr float kMinWeightSum = 6.103515625e-5f;
// llama.cpp's LLAMA_MAX_EXPERTS: no real file has more.
constexpr uint64_t kMaxExperts = 512;

Status read_count(const gguf::File& f, const std::string& key, int32_t& out, uint64_t max) {
  Result<uint64_t> v = f.get_uint(key);
  if (!v) return v.error();
  if (*v < 1 || *v > max) return make_error("model: " + key + " = " + std::to_string(*v) + " is out of range");
  out = static_cast<int32_t>(*v);
  return {};
}

Status read_moe_config(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  Status s;
  if (!(s = read_count(f, a + "expert_count", c.n_expert, kMaxExperts))) return s;
  if (!(s = read_count(f, a + "expert_used_count", c.n_expert_used, static_cast<uint64_t>(c.n_expert)))) return s;
  if (f.has(a + "expert_feed_forward_length")) {
    if (!(s = read_count(f, a + "expert_feed_forward_length", c.n_ff_exp, uint64_t{1} << 30))) return s;
  } else {
    c.n_ff_exp = c.n_ff / c.n_expert_used;
    if (c.n_ff_exp < 1) return make_error("model: no " + a + "expert_feed_forward_length, and n_ff is too small");
  }
  Result<double> scale = f.get_float_or(a + "expert_weights_scale", 0.0);
  if (!scale) return scale.error();
  if (!std::isfinite(*scale)) return make_error("model: " + a + "expert_weights_scale is not finite");
  c.expert_weights_scale = *scale == 0.0 ? 1.0f : static_cast<float>(*scale);
  return {};
}

// The mixture-of-experts FFN of the rows of `cur` into tmp (ops of backends/backend.h).
void build_moe_ffn(Graph& g, const ModelConfig& c, const LayerWeights& w, int64_t n, const Activations& a) {
  using namespace ops;
  const int64_t nk = n * c.n_expert_used;
  const Tensor cur = rows(a.cur, n), tmp = rows(a.tmp, n);
  const Tensor ids = rows(a.expert_ids, n), weights = rows(a.expert_weights, n);
  const Tensor gate = rows(a.expert_gate, nk), up = rows(a.expert_up, nk), out = rows(a.expert_out, nk);

  matmul(g, rows(a.router, n), w.ffn_gate_inp, cur);
  Op route{OpKind::MoeRoute};
  route.src0 = rows(a.router, n);
  route.src1 = ids;
  route.dst = weights;
  route.i0 = 1;  // Qwen3-MoE renormalises over the chosen experts
  route.f0 = kMinWeightSum;
  g.ops.push_back(route);
  if (c.expert_weights_scale != 1.0f) scale(g, weights, weights, c.expert_weights_scale);

  auto experts = [&](const Tensor& dst, const Tensor& stack, const Tensor& x, bool per_slot) {
    Op op{OpKind::MatMulExperts};
    op.dst = dst;
    op.src0 = stack;
    op.src1 = x;
    op.src2 = ids;
    op.i1 = per_slot ? 1 : 0;
    g.ops.push_back(op);
  };
  experts(gate, w.ffn_gate_exps, cur, false);
  experts(up, w.ffn_up_exps, cur, false);
  gated(g, OpKind::SiluMul, gate, gate, up);
  experts(out, w.ffn_down_exps, gate, true);

  Op combine{OpKind::MoeCombine};
  combine.src0 = out;
  combine.src1 = weights;
  combine.dst = tmp;
  g.ops.push_back(combine);
}

class Qwen3Moe final : public Architecture {
 public:
  Status read_config(const gguf::File& f, ModelConfig& c) const override {
    if (Status s = qwen3_architecture().read_config(f, c); !s) return s;
    return read_moe_config(f, c);
  }

  Status bind_weights(const WeightBinder& b, const ModelConfig& c, ModelWeights& w) const override {
    Status s;
    if (!(s = b.bind_embeddings(c, w)) || !(s = b.bind_attention_blocks(c, w)) || !(s = b.bind_qk_norms(c, w)))
      return s;
    return b.bind_moe_ffns(c, w);
  }

  // Qwen3's attention, then RMSNorm -> the experts -> residual add.
  void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int, const BatchLayout& b,
                   const Activations& a, const Tensor& k_cache, const Tensor& v_cache) const override {
    build_llama_attention(g, c, w, b, a, k_cache, v_cache);
    const Tensor x = ops::rows(a.x, b.n), cur = ops::rows(a.cur, b.n);
    ops::rms_norm(g, cur, x, w.ffn_norm, c.rms_eps);
    build_moe_ffn(g, c, w, b.n, a);
    ops::add(g, x, x, ops::rows(a.tmp, b.n));
  }
};

}  // namespace

const Architecture& qwen3moe_architecture() {
  static const Qwen3Moe arch;
  return arch;
}

}  // namespace hearth
