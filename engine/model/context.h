// InferenceContext: one sequence's KV cache and the activation buffers of its forward
// passes, on a backend. eval() appends tokens, running them through the model in chunks
// of at most n_batch tokens, and keeps the logits that were asked for.
//
// KV layout: per layer a K and a V tensor of [n_ctx slots, kv_dim] in kv_type; the token
// at position p lives in slot p. This is the one-sequence layout of in-process runs
// (hearth-run, the reference and backend tests); the daemon's scheduler shares the same
// ForwardBuffers between sequences and hands out slots from the paged block pool
// (engine/kv/block_pool.h) instead, through the position -> slot map the model takes.
//
// Thread-safety: owned and used by one thread.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/model/model.h"

namespace hearth {

struct ContextOptions {
  int32_t n_ctx = 4096;        // tokens the sequence may hold
  int32_t n_batch = 512;       // tokens per forward pass (prefill chunk)
  int32_t n_logits_max = 32;   // logit rows per forward pass when every row is wanted
  DType kv_type = DType::F16;  // F16 (default), F32 or Q8_0
};

// Whether the KV cache of model `c` can be kept in `kv_type` on `backend`: F16, F32, or Q8_0
// (blocks of 32 elements, so kv_dim must be a multiple of 32), and a type the backend runs.
Status check_kv_type(const ModelConfig& c, const Backend& backend, DType kv_type);

// Device memory for forward passes: a KV pool of n_slots token slots per layer (the
// sliding-window layers n_sliding_slots, when that is given and smaller: see
// SeqChunk::sliding_slots) and the activations of one batch of up to n_batch tokens
// (n_logits logit rows). Shared by the single-sequence context below and by anything that
// batches several sequences.
struct ForwardBuffers {
  std::unique_ptr<Buffer> kv_buffer, act_buffer;
  KvTensors kv;
  Activations act;
};
Result<ForwardBuffers> allocate_forward_buffers(const ModelConfig& c, Backend& backend, int64_t n_slots,
                                                int64_t n_batch, int64_t n_logits, DType kv_type,
                                                int64_t n_sliding_slots = 0);

class InferenceContext {
 public:
  static Result<std::unique_ptr<InferenceContext>> create(const Model& model, Backend& backend,
                                                          const ContextOptions& options);

  // Runs `tokens` at positions n_past() .. n_past() + n - 1. Afterwards logits() holds the
  // last token's logits, or every token's (row i = tokens[i]) when all_logits is set.
  // An error when the tokens do not fit in n_ctx or an id is outside the vocabulary.
  Status eval(std::span<const int32_t> tokens, bool all_logits = false);

  // [rows, n_vocab], row-major.
  const std::vector<float>& logits() const { return logits_; }
  std::span<const float> logits_row(int64_t i) const;
  int32_t n_past() const { return n_past_; }
  int32_t n_ctx() const { return options_.n_ctx; }
  // Forgets the tokens at positions >= n (n <= n_past()).
  void rewind(int32_t n);

  const Model& model() const { return model_; }

 private:
  InferenceContext(const Model& model, Backend& backend, const ContextOptions& options)
      : model_(model), backend_(backend), options_(options) {}
  Status forward(std::span<const int32_t> tokens, std::span<const int32_t> logit_rows);

  const Model& model_;
  Backend& backend_;
  ContextOptions options_;
  ForwardBuffers buf_;
  std::vector<int32_t> slots_;  // position -> KV slot
  Graph graph_;
  std::vector<float> logits_;
  int32_t n_past_ = 0;
};

}  // namespace hearth
