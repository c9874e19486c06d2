// What an architecture file provides, and the building blocks they share.
// Internal to engine/model.
#pragma once

#include <string>

#include "engine/model/model.h"

namespace hearth {

// Reads named tensors of a GGUF file as backend Tensors and checks their shapes.
class WeightBinder {
 public:
  WeightBinder(const gguf::File& file, Buffer* buffer) : file_(file), buffer_(buffer) {}
  // The tensor `name` with ne0 = `cols` and `rows` rows; an error if missing or misshapen.
  Result<Tensor> get(const std::string& name, int64_t cols, int64_t rows) const;
  // get() into `out`; the error as a Status.
  Status bind(const std::string& name, int64_t cols, int64_t rows, Tensor& out) const;
  // Binds the embedding table, the final norm and the output projection (the embedding
  // table itself when the file has no output.weight: tied embeddings).
  Status bind_embeddings(const ModelConfig& c, ModelWeights& w) const;
  // Binds the tensors every decoder block has (blk.N.attn_norm, attn_q/k/v/output,
  // ffn_norm, ffn_gate/up/down) of every layer, sizing w.layers.
  Status bind_blocks(const ModelConfig& c, ModelWeights& w) const;
  // bind_blocks in two: the attention half (attn_norm, attn_q/k/v/output, ffn_norm) and
  // the dense FFN (ffn_gate/up/down); a mixture-of-experts model binds only the first.
  Status bind_attention_blocks(const ModelConfig& c, ModelWeights& w) const;
  Status bind_dense_ffns(const ModelConfig& c, ModelWeights& w) const;
  // Binds blk.N.ffn_gate_inp and ffn_{gate,up,down}_exps (3-D: [n_in, n_out, n_expert]) of
  // every layer, the stacks as [n_expert * n_out rows, n_in] tensors.
  Status bind_moe_ffns(const ModelConfig& c, ModelWeights& w) const;
  // Binds blk.N.attn_q/k/v.bias (F32) of every layer; when !required, a layer without
  // them keeps invalid tensors (no bias), but a layer with only some is an error.
  Status bind_qkv_biases(const ModelConfig& c, ModelWeights& w, bool required) const;
  // Binds blk.N.attn_q_norm / attn_k_norm (head_dim each: per-head RMSNorm of Q and K,
  // Gemma 3 and Qwen3) of every layer.
  Status bind_qk_norms(const ModelConfig& c, ModelWeights& w) const;
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

 private:
  const gguf::File& file_;
  Buffer* buffer_;
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual Status read_config(const gguf::File& f, ModelConfig& c) const = 0;
  virtual Status bind_weights(const WeightBinder& b, const ModelConfig& c, ModelWeights& w) const = 0;
  // Records one transformer block for the batch's rows of `act`, updating act.x.
  virtual void build_layer(Graph& g, const ModelConfig& c, const LayerWeights& w, int layer, const BatchLayout& b,
                           const Activations& act, const Tensor& k_cache, const Tensor& v_cache) const = 0;
};

const Architecture* find_architecture(const std::string& name);  // null when unknown
// general.architecture, general.name (else the file's stem) and the architecture's
// hyper-parameters into c; an error when the architecture is unknown or its keys are wrong.
// Model::load's first step; the installed-model listing (installed.cpp) stops there.
Result<const Architecture*> read_model_config(const gguf::File& f, ModelConfig& c);
const Architecture& gemma3_architecture();
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();

// The Llama block, shared by the architectures built on it (llama, qwen2, qwen3): RMSNorm ->
// Q, K, V (+ biases when the layer has them) -> per-head RMSNorm of Q and K (when the
// layer has q_norm and k_norm) -> RoPE (c.rope_layout, c.rope_base) ->
// attention -> output projection -> residual add -> RMSNorm -> SiLU(gate) x up -> down ->
// residual add.
void build_llama_block(Graph& g, const ModelConfig& c, const LayerWeights& w, const BatchLayout& b,
                       const Activations& a, const Tensor& k_cache, const Tensor& v_cache);
// Its first half, up to and including the attention's residual add.
void build_llama_attention(Graph& g, const ModelConfig& c, const LayerWeights& w, const BatchLayout& b,
                           const Activations& a, const Tensor& k_cache, const Tensor& v_cache);

// Reads the hyper-parameters every decoder shares ("{arch}.block_count" etc.).
Status read_common_config(const gguf::File& f, ModelConfig& c);

// Small helpers that record one op each (shapes as in backends/backend.h).
namespace ops {
Tensor rows(const Tensor& t, int64_t n);  // first n rows
void rms_norm(Graph& g, const Tensor& dst, const Tensor& src, const Tensor& weight, float eps);
void matmul(Graph& g, const Tensor& dst, const Tensor& w, const Tensor& x);
void rope(Graph& g, const Tensor& x, IntSpan positions, int32_t head_dim, int32_t n_rot, int32_t layout, float base,
          float pos_scale);
void add(Graph& g, const Tensor& dst, const Tensor& a, const Tensor& b);
void add_row(Graph& g, const Tensor& dst, const Tensor& a, const Tensor& row);  // dst[t] = a[t] + row[0]
void gated(Graph& g, OpKind kind, const Tensor& dst, const Tensor& gate, const Tensor& up);
void scale(Graph& g, const Tensor& dst, const Tensor& src, float f);
void store_kv(Graph& g, const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache, IntSpan slots);
// One Attention op per sequence of the batch, over its rows of q and dst.
void attention(Graph& g, const Tensor& dst, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const BatchLayout& b, const ModelConfig& c, int32_t window);
}  // namespace ops

}  // namespace hearth
