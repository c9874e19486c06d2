#include "engine/model/context.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace hearth {
namespace {

// Lays out consecutive tensors in one buffer, each 64-byte aligned.
class Arena {
 public:
  Tensor take(DType type, int64_t ne0, int64_t rows) {
    Tensor t;
    t.offset = bytes_;
    t.type = type;
    t.ne0 = ne0;
    t.rows = rows;
    t.row_stride = row_bytes(type, ne0);
    bytes_ += (t.row_stride * static_cast<size_t>(rows) + 63) / 64 * 64;
    return t;
  }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

void bind(Tensor& t, Buffer* b) {
  t.buffer = b;
}

}  // namespace

Status check_kv_type(const ModelConfig& c, const Backend& backend, DType kv_type) {
  if (kv_type != DType::F16 && kv_type != DType::F32 && kv_type != DType::Q8_0)
    return make_error(std::string("KV cache type must be f16, f32 or q8_0, not ") + dtype_name(kv_type));
  if (c.kv_dim() % dtype_info(kv_type).block_elems != 0)
    return make_error("KV cache type " + std::string(dtype_name(kv_type)) + " needs a KV row length (" +
                      std::to_string(c.kv_dim()) + ") that is a multiple of " +
                      std::to_string(dtype_info(kv_type).block_elems));
  if (!backend.caps().supports_kv(kv_type))
    return make_error("the " + backend.info().kind + " backend cannot keep the KV cache in " + dtype_name(kv_type));
  return {};
}

Result<ForwardBuffers> allocate_forward_buffers(const ModelConfig& c, Backend& backend, int64_t n_slots,
                                                int64_t n_batch, int64_t n_logits, DType kv_type,
                                                int64_t n_sliding_slots) {
  if (Status s = check_kv_type(c, backend, kv_type); !s) return make_error("context: " + s.error().message);
  ForwardBuffers fb;
  Arena kv_arena;
  for (int il = 0; il < c.n_layer; ++il) {
    const int64_t n = c.layer_sliding(il) && n_sliding_slots > 0 ? std::min(n_slots, n_sliding_slots) : n_slots;
    fb.kv.k.push_back(kv_arena.take(kv_type, c.kv_dim(), n));
    fb.kv.v.push_back(kv_arena.take(kv_type, c.kv_dim(), n));
  }
  Result<std::unique_ptr<Buffer>> kv = backend.alloc(kv_arena.bytes(), BufferKind::KvCache);
  if (!kv) return kv.error();
  fb.kv_buffer = std::move(*kv);
  for (Tensor& t : fb.kv.k) bind(t, fb.kv_buffer.get());
  for (Tensor& t : fb.kv.v) bind(t, fb.kv_buffer.get());

  const int64_t n = n_batch;
  Arena arena;
  Activations& a = fb.act;
  a.x = arena.take(DType::F32, c.n_embd, n);
  a.cur = arena.take(DType::F32, c.n_embd, n);
  a.tmp = arena.take(DType::F32, c.n_embd, n);
  a.q = arena.take(DType::F32, c.q_dim(), n);
  a.attn = arena.take(DType::F32, c.q_dim(), n);
  a.k = arena.take(DType::F32, c.kv_dim(), n);
  a.v = arena.take(DType::F32, c.kv_dim(), n);
  // A mixture-of-experts model has no dense FFN (its feed_forward_length is unused): its
  // gate and up live in expert_gate / expert_up.
  const int64_t n_ff = c.n_expert > 0 ? 0 : c.n_ff;
  a.gate = arena.take(DType::F32, n_ff, n);
  a.up = arena.take(DType::F32, n_ff, n);
  a.logits = arena.take(DType::F32, c.n_vocab, std::min(n, n_logits));
  std::vector<Tensor*> moe;
  if (c.n_expert > 0) {
    const int64_t k = c.n_expert_used;
    a.router = arena.take(DType::F32, c.n_expert, n);
    a.expert_ids = arena.take(DType::I32, k, n);
    a.expert_weights = arena.take(DType::F32, k, n);
    a.expert_gate = arena.take(DType::F32, c.n_ff_exp, n * k);
    a.expert_up = arena.take(DType::F32, c.n_ff_exp, n * k);
    a.expert_out = arena.take(DType::F32, c.n_embd, n * k);
    moe = {&a.router, &a.expert_ids, &a.expert_weights, &a.expert_gate, &a.expert_up, &a.expert_out};
  }
  Result<std::unique_ptr<Buffer>> act = backend.alloc(arena.bytes(), BufferKind::Activations);
  if (!act) return act.error();
  fb.act_buffer = std::move(*act);
  for (Tensor* t : {&a.x, &a.cur, &a.tmp, &a.q, &a.attn, &a.k, &a.v, &a.gate, &a.up, &a.logits})
    bind(*t, fb.act_buffer.get());
  for (Tensor* t : moe) bind(*t, fb.act_buffer.get());
  return fb;
}

Result<std::unique_ptr<InferenceContext>> InferenceContext::create(const Model& model, Backend& backend,
                                                                   const ContextOptions& options) {
  if (options.n_ctx < 1 || options.n_batch < 1 || options.n_logits_max < 1)
    return make_error("context: n_ctx, n_batch and n_logits_max must be positive");
  std::unique_ptr<InferenceContext> ctx(new InferenceContext(model, backend, options));
  Result<ForwardBuffers> fb = allocate_forward_buffers(model.config(), backend, options.n_ctx, options.n_batch,
                                                       options.n_logits_max, options.kv_type);
  if (!fb) return fb.error();
  ctx->buf_ = std::move(*fb);
  ctx->slots_.resize(options.n_ctx);
  std::iota(ctx->slots_.begin(), ctx->slots_.end(), 0);
  return ctx;
}

std::span<const float> InferenceContext::logits_row(int64_t i) const {
  const size_t v = static_cast<size_t>(model_.config().n_vocab);
  return {logits_.data() + static_cast<size_t>(i) * v, v};
}

void InferenceContext::rewind(int32_t n) {
  n_past_ = std::clamp(n, 0, n_past_);
}

Status InferenceContext::eval(std::span<const int32_t> tokens, bool all_logits) {
  const ModelConfig& c = model_.config();
  if (tokens.empty()) return make_error("context: nothing to evaluate");
  if (static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()) > options_.n_ctx)
    return make_error("context: " + std::to_string(n_past_ + tokens.size()) + " tokens exceed the context of " +
                      std::to_string(options_.n_ctx));
  for (int32_t t : tokens)
    if (t < 0 || t >= c.n_vocab) return make_error("context: token id " + std::to_string(t) + " is out of range");

  const size_t v = static_cast<size_t>(c.n_vocab);
  logits_.assign(all_logits ? tokens.size() * v : v, 0.0f);
  const int64_t chunk = all_logits ? std::min(options_.n_batch, options_.n_logits_max) : options_.n_batch;
  std::vector<int32_t> rows;
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(chunk)) {
    const size_t n = std::min(tokens.size() - begin, static_cast<size_t>(chunk));
    const bool last = begin + n == tokens.size();
    rows.clear();
    if (all_logits) {
      for (size_t i = 0; i < n; ++i) rows.push_back(static_cast<int32_t>(i));
    } else if (last) {
      rows.push_back(static_cast<int32_t>(n - 1));
    }
    if (Status s = forward(tokens.subspan(begin, n), rows); !s) return s;
    if (!rows.empty()) {
      float* dst = logits_.data() + (all_logits ? begin * v : 0);
      if (Status s =
              backend_.read(*buf_.act.logits.buffer, buf_.act.logits.offset, dst, rows.size() * v * sizeof(float));
          !s)
        return s;
    }
  }
  return {};
}

Status InferenceContext::forward(std::span<const int32_t> tokens, std::span<const int32_t> logit_rows) {
  graph_.clear();
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{tokens, n_past_, slots_});
  batch.logit_rows.assign(logit_rows.begin(), logit_rows.end());
  model_.build_forward(graph_, batch, buf_.act, buf_.kv);
  if (Status s = backend_.execute(graph_); !s) return s;
  n_past_ += static_cast<int32_t>(tokens.size());
  return {};
}

}  // namespace hearth
