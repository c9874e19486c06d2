// A loaded model: its hyper-parameters (from GGUF metadata), its weights resident on a
// backend, and the recipe that records a forward pass. One file per architecture
// (gemma3.cpp, llama.cpp, qwen2.cpp, qwen3.cpp, qwen3moe.cpp) implements Architecture; nothing here
// contains device code.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/result.h"
#include "engine/gguf/gguf.h"

namespace hearth {

struct ModelConfig {
  std::string arch;  // general.architecture: "gemma3", "llama", "qwen2", "qwen3", "qwen3moe"
  std::string name;  // general.name, or the file name
  int32_t n_layer = 0;
  int32_t n_embd = 0;     // width of the residual stream
  int32_t n_head = 0;     // query heads
  int32_t n_head_kv = 0;  // key/value heads (grouped-query attention)
  int32_t head_dim = 0;   // per head, keys and values
  int32_t n_ff = 0;       // FFN hidden width (dense FFN)
  // Mixture of experts (qwen3moe; 0 in dense models): each token's FFN is the weighted sum
  // of n_expert_used of n_expert expert FFNs, each n_ff_exp wide.
  int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  float expert_weights_scale = 1.0f;  // multiplies the routing weights (1 in Qwen3-MoE)
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // tokens
  int32_t n_rot = 0;        // rotated dims per head
  int32_t rope_layout = kRopeNormal;
  float rms_eps = 1e-6f;
  float rope_base = 10000.0f;      // global-attention layers
  float rope_base_swa = 10000.0f;  // sliding-window layers
  float rope_pos_scale = 1.0f;     // 1 / linear scaling factor (global layers)
  int32_t sliding_window = 0;      // tokens; 0 = none
  std::vector<bool> layer_swa;     // per layer: uses the sliding window
  float embed_scale = 1.0f;        // multiplies token embeddings
  float attn_scale = 1.0f;         // multiplies q.k
  float attn_softcap = 0.0f;       // 0 = none
  float final_softcap = 0.0f;      // logits softcap, 0 = none

  int32_t q_dim() const { return n_head * head_dim; }
  // Whether layer il attends through the sliding window, and how many layers do.
  bool layer_sliding(int il) const {
    return sliding_window > 0 && static_cast<size_t>(il) < layer_swa.size() && layer_swa[static_cast<size_t>(il)];
  }
  int32_t n_sliding_layers() const {
    int32_t n = 0;
    for (int il = 0; il < n_layer; ++il) n += layer_sliding(il) ? 1 : 0;
    return n;
  }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Weights of one transformer block; tensors an architecture does not use stay invalid.
struct LayerWeights {
  Tensor attn_norm;         // [1, n_embd] F32
  Tensor wq, wk, wv;        // [q_dim | kv_dim rows, n_embd]
  Tensor bq, bk, bv;        // [1, q_dim | kv_dim] F32, added after wq/wk/wv (qwen2; optional in llama)
  Tensor q_norm, k_norm;    // [1, head_dim] (gemma3, qwen3)
  Tensor wo;                // [n_embd rows, q_dim]
  Tensor post_attn_norm;    // [1, n_embd] (gemma3)
  Tensor ffn_norm;          // [1, n_embd]
  Tensor ffn_gate, ffn_up;  // [n_ff rows, n_embd]
  Tensor ffn_down;          // [n_embd rows, n_ff]
  Tensor post_ffn_norm;     // [1, n_embd] (gemma3)
  // Mixture of experts (qwen3moe): the router and the experts' matrices stacked, expert e's
  // row o at row e * n_out + o (llama.cpp's [n_in, n_out, n_expert] tensors).
  Tensor ffn_gate_inp;                // [n_expert rows, n_embd]
  Tensor ffn_gate_exps, ffn_up_exps;  // [n_expert * n_ff_exp rows, n_embd]
  Tensor ffn_down_exps;               // [n_expert * n_embd rows, n_ff_exp]
};

struct ModelWeights {
  Tensor tok_embd;     // [n_vocab rows, n_embd]
  Tensor output_norm;  // [1, n_embd]
  Tensor output;       // [n_vocab rows, n_embd]; the embedding table when tied
  std::vector<LayerWeights> layers;
};

// Activation tensors of one forward pass, sized for up to n_max rows (tokens).
struct Activations {
  Tensor x;         // residual stream [n, n_embd]
  Tensor cur;       // normalised input of a sub-block [n, n_embd]
  Tensor tmp;       // sub-block output [n, n_embd]
  Tensor q, attn;   // [n, q_dim]
  Tensor k, v;      // [n, kv_dim]
  Tensor gate, up;  // [n, n_ff]
  Tensor logits;    // [n_logits, n_vocab]
  // Mixture of experts only (invalid otherwise); k = n_expert_used.
  Tensor router;                  // [n, n_expert] router logits
  Tensor expert_ids;              // [n, k] I32: each token's experts, most probable first
  Tensor expert_weights;          // [n, k]: their routing weights
  Tensor expert_gate, expert_up;  // [n * k, n_ff_exp]: row t * k + j for token t's j-th expert
  Tensor expert_out;              // [n * k, n_embd]
};

// Consecutive tokens of one sequence inside a forward pass.
struct SeqChunk {
  std::span<const int32_t> tokens;
  int32_t first_pos = 0;  // position of tokens[0]
  // KV slot of every position 0 .. first_pos + tokens.size() - 1 of this sequence; the
  // chunk's own keys and values are written to the slots of its positions.
  std::span<const int32_t> kv_slots;
  // The same for the sliding-window layers, whose KV may live in smaller tensors (a block
  // pool's companions, engine/kv/block_pool.h); only the positions inside the window of the
  // chunk's tokens need a real slot. Empty: kv_slots.
  std::span<const int32_t> sliding_slots = {};
};

// What one forward pass computes: chunks of one or more sequences (continuous batching
// mixes decode steps of running sequences with a prefill chunk of a new one). Their rows
// are laid out one chunk after another. Sequences must map positions to distinct slots.
struct ForwardBatch {
  std::vector<SeqChunk> seqs;
  std::vector<int32_t> logit_rows;  // rows (into the concatenated tokens) whose logits are wanted
  int64_t n_tokens() const;
};

// Where one sequence's rows sit in a batch, and the integer inputs its attention reads.
struct AttnSeq {
  int64_t row0 = 0, n = 0;  // rows [row0, row0 + n) of the batch
  IntSpan positions;        // [n]
  IntSpan kv_slots;         // [first_pos + n]: slot of each visible position
};

// The integer inputs of one forward pass, shared by every layer.
struct BatchLayout {
  int64_t n = 0;      // rows (tokens) in the batch
  IntSpan positions;  // [n], for RoPE
  IntSpan new_slots;  // [n], where StoreKv writes each row
  std::vector<AttnSeq> seqs;
};

// KV cache tensors per layer: [n_slots, kv_dim] in the cache type; sliding-window layers
// may have fewer slots (SeqChunk::sliding_slots).
struct KvTensors {
  std::vector<Tensor> k, v;
};

class Architecture;

class Model {
 public:
  // Reads hyper-parameters and binds weights; uploads the weights to the backend once.
  static Result<std::unique_ptr<Model>> load(std::shared_ptr<const gguf::File> file, Backend& backend);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::File& file() const { return *file_; }

  // Records the forward pass of `batch` into g: embeddings, every block (writing each
  // chunk's keys and values into its slots), logits of the requested rows into
  // act.logits (row i of act.logits = batch.logit_rows[i]). act holds at least
  // batch.n_tokens() rows.
  void build_forward(Graph& g, const ForwardBatch& batch, const Activations& act, const KvTensors& kv) const;

 private:
  Model() = default;
  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const gguf::File> file_;
  std::unique_ptr<Buffer> weight_buffer_;
  const Architecture* arch_ = nullptr;
};

}  // namespace hearth
