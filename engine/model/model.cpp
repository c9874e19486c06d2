#include "engine/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "common/log.h"
#include "engine/model/architecture.h"

namespace hearth {
namespace {

std::string key(const ModelConfig& c, const char* suffix) {
  return c.arch + "." + suffix;
}

template <class T>
Status read_int(const gguf::File& f, const std::string& k, T& out, bool required, T def = 0) {
  if (!f.has(k)) {
    if (required) return make_error("model: missing metadata key " + k);
    out = def;
    return {};
  }
  Result<uint64_t> v = f.get_uint(k);
  if (!v) return v.error();
  if (*v > 1u << 30) return make_error("model: " + k + " = " + std::to_string(*v) + " is out of range");
  out = static_cast<T>(*v);
  return {};
}

}  // namespace

Status read_common_config(const gguf::File& f, ModelConfig& c) {
  Status s;
  if (!(s = read_int(f, key(c, "block_count"), c.n_layer, true))) return s;
  if (!(s = read_int(f, key(c, "embedding_length"), c.n_embd, true))) return s;
  if (!(s = read_int(f, key(c, "feed_forward_length"), c.n_ff, true))) return s;
  if (!(s = read_int(f, key(c, "attention.head_count"), c.n_head, true))) return s;
  if (!(s = read_int(f, key(c, "attention.head_count_kv"), c.n_head_kv, false, c.n_head))) return s;
  if (!(s = read_int(f, key(c, "context_length"), c.n_ctx_train, false, 4096))) return s;
  if (c.n_layer < 1 || c.n_embd < 1 || c.n_head < 1 || c.n_head_kv < 1 || c.n_ff < 1)
    return make_error("model: hyper-parameters must be positive");
  if (c.n_head % c.n_head_kv != 0)
    return make_error("model: head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
                      std::to_string(c.n_head_kv));
  if (!(s = read_int(f, key(c, "attention.key_length"), c.head_dim, false, c.n_embd / c.n_head))) return s;
  int32_t v_len = 0;
  if (!(s = read_int(f, key(c, "attention.value_length"), v_len, false, c.head_dim))) return s;
  if (v_len != c.head_dim) return make_error("model: key_length != value_length is not supported");
  if (c.head_dim < 2 || c.head_dim % 2 != 0) return make_error("model: head dimension must be even");
  if (!(s = read_int(f, key(c, "rope.dimension_count"), c.n_rot, false, c.head_dim))) return s;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) return make_error("model: bad rope.dimension_count");

  Result<double> eps = f.get_float_or(key(c, "attention.layer_norm_rms_epsilon"), 1e-5);
  if (!eps) return eps.error();
  c.rms_eps = static_cast<float>(*eps);
  Result<double> base = f.get_float_or(key(c, "rope.freq_base"), 10000.0);
  if (!base) return base.error();
  c.rope_base = static_cast<float>(*base);
  Result<double> factor = f.get_float_or(key(c, "rope.scaling.factor"), 1.0);
  if (!factor) return factor.error();
  if (f.has(key(c, "rope.scaling.type"))) {
    Result<std::string_view> type = f.get_string(key(c, "rope.scaling.type"));
    if (!type) return type.error();
    if (*type != "linear" && *type != "none")
      return make_error("model: rope scaling '" + std::string(*type) + "' is not supported");
    if (*type == "none") *factor = 1.0;
  }
  if (*factor <= 0.0) return make_error("model: rope.scaling.factor must be positive");
  c.rope_pos_scale = static_cast<float>(1.0 / *factor);
  Result<double> softcap = f.get_float_or(key(c, "attn_logit_softcapping"), 0.0);
  if (!softcap) return softcap.error();
  c.attn_softcap = static_cast<float>(*softcap);
  softcap = f.get_float_or(key(c, "final_logit_softcapping"), 0.0);
  if (!softcap) return softcap.error();
  c.final_softcap = static_cast<float>(*softcap);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.layer_swa.assign(c.n_layer, false);
  return {};
}

Result<Tensor> WeightBinder::get(const std::string& name, int64_t cols, int64_t rows) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (t == nullptr) return make_error("model: missing tensor " + name);
  if (t->ne[0] != cols || t->n_rows() != rows)
    return make_error("model: tensor " + name + " has shape [" + std::to_string(t->ne[0]) + ", " +
                      std::to_string(t->n_rows()) + "], expected [" + std::to_string(cols) + ", " +
                      std::to_string(rows) + "]");
  Tensor out;
  out.buffer = buffer_;
  out.offset = static_cast<size_t>(t->data - file_.base()) - file_.data_offset();
  out.type = t->type;
  out.ne0 = cols;
  out.rows = rows;
  out.row_stride = row_bytes(t->type, cols);
  return out;
}

Status WeightBinder::bind(const std::string& name, int64_t cols, int64_t rows, Tensor& out) const {
  Result<Tensor> t = get(name, cols, rows);
  if (!t) return t.error();
  out = *t;
  return {};
}

Status WeightBinder::bind_embeddings(const ModelConfig& c, ModelWeights& w) const {
  Status s;
  if (!(s = bind("token_embd.weight", c.n_embd, c.n_vocab, w.tok_embd))) return s;
  if (!(s = bind("output_norm.weight", c.n_embd, 1, w.output_norm))) return s;
  if (!has("output.weight")) {
    w.output = w.tok_embd;
    return {};
  }
  return bind("output.weight", c.n_embd, c.n_vocab, w.output);
}

Status WeightBinder::bind_blocks(const ModelConfig& c, ModelWeights& w) const {
  if (Status s = bind_attention_blocks(c, w); !s) return s;
  return bind_dense_ffns(c, w);
}

Status WeightBinder::bind_attention_blocks(const ModelConfig& c, ModelWeights& w) const {
  w.layers.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    Status s;
    if (!(s = bind(p + "attn_norm.weight", c.n_embd, 1, l.attn_norm))) return s;
    if (!(s = bind(p + "attn_q.weight", c.n_embd, c.q_dim(), l.wq))) return s;
    if (!(s = bind(p + "attn_k.weight", c.n_embd, c.kv_dim(), l.wk))) return s;
    if (!(s = bind(p + "attn_v.weight", c.n_embd, c.kv_dim(), l.wv))) return s;
    if (!(s = bind(p + "attn_output.weight", c.q_dim(), c.n_embd, l.wo))) return s;
    if (!(s = bind(p + "ffn_norm.weight", c.n_embd, 1, l.ffn_norm))) return s;
  }
  return {};
}

Status WeightBinder::bind_dense_ffns(const ModelConfig& c, ModelWeights& w) const {
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    Status s;
    if (!(s = bind(p + "ffn_gate.weight", c.n_embd, c.n_ff, l.ffn_gate))) return s;
    if (!(s = bind(p + "ffn_up.weight", c.n_embd, c.n_ff, l.ffn_up))) return s;
    if (!(s = bind(p + "ffn_down.weight", c.n_ff, c.n_embd, l.ffn_down))) return s;
  }
  return {};
}

Status WeightBinder::bind_moe_ffns(const ModelConfig& c, ModelWeights& w) const {
  // A stack [n_in, n_out, n_expert]: checked dimension by dimension (its rows alone would
  // pass a tensor with n_out and n_expert swapped), bound as n_expert * n_out rows.
  auto stack = [&](const std::string& name, int64_t n_in, int64_t n_out, Tensor& out) -> Status {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t != nullptr && (t->n_dims != 3 || t->ne[1] != n_out || t->ne[2] != c.n_expert))
      return make_error("model: tensor " + name + " has shape [" + std::to_string(t->ne[0]) + ", " +
                        std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + ", " + std::to_string(t->ne[3]) +
                        "], expected [" + std::to_string(n_in) + ", " + std::to_string(n_out) + ", " +
                        std::to_string(c.n_expert) + "]");
    return bind(name, n_in, n_out * c.n_expert, out);
  };
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    Status s;
    if (!(s = bind(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert, l.ffn_gate_inp))) return s;
    if (!(s = stack(p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, l.ffn_gate_exps))) return s;
    if (!(s = stack(p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, l.ffn_up_exps))) return s;
    if (!(s = stack(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, l.ffn_down_exps))) return s;
  }
  return {};
}

Status WeightBinder::bind_qk_norms(const ModelConfig& c, ModelWeights& w) const {
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    if (Status s = bind(p + "attn_q_norm.weight", c.head_dim, 1, l.q_norm); !s) return s;
    if (Status s = bind(p + "attn_k_norm.weight", c.head_dim, 1, l.k_norm); !s) return s;
  }
  return {};
}

Status WeightBinder::bind_qkv_biases(const ModelConfig& c, ModelWeights& w, bool required) const {
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    const std::pair<const char*, int32_t> names[] = {
        {"attn_q.bias", c.q_dim()}, {"attn_k.bias", c.kv_dim()}, {"attn_v.bias", c.kv_dim()}};
    Tensor* dst[] = {&l.bq, &l.bk, &l.bv};
    int n_present = 0;
    for (const auto& [name, n] : names) n_present += has(p + name) ? 1 : 0;
    if (n_present == 0 && !required) continue;
    for (int i = 0; i < 3; ++i) {
      if (Status s = bind(p + names[i].first, names[i].second, 1, *dst[i]); !s) return s;
      // AddRow reads F32 rows; converters always store biases so.
      if (dst[i]->type != DType::F32)
        return make_error("model: tensor " + p + names[i].first + " is " + dtype_name(dst[i]->type) +
                          "; biases must be F32");
    }
  }
  return {};
}

const Architecture* find_architecture(const std::string& name) {
  if (name == "gemma3") return &gemma3_architecture();
  if (name == "llama") return &llama_architecture();
  if (name == "qwen2") return &qwen2_architecture();
  if (name == "qwen3") return &qwen3_architecture();
  if (name == "qwen3moe") return &qwen3moe_architecture();
  return nullptr;
}

Model::~Model() = default;

Result<const Architecture*> read_model_config(const gguf::File& f, ModelConfig& c) {
  Result<std::string_view> arch = f.get_string("general.architecture");
  if (!arch) return arch.error();
  c.arch = std::string(*arch);
  const Architecture* a = find_architecture(c.arch);
  if (a == nullptr)
    return make_error("model: architecture '" + c.arch +
                      "' is not supported (supported: gemma3, llama, qwen2, qwen3, qwen3moe)");
  Result<std::string_view> name = f.get_string("general.name");
  c.name = name ? std::string(*name) : std::filesystem::path(f.path()).stem().string();
  if (Status s = a->read_config(f, c); !s) return s.error();
  return a;
}

Result<std::unique_ptr<Model>> Model::load(std::shared_ptr<const gguf::File> file, Backend& backend) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  const gguf::File& f = *m->file_;
  Result<const Architecture*> arch = read_model_config(f, m->config_);
  if (!arch) return arch.error();
  m->arch_ = *arch;

  // Vocabulary size: the token list when present, else the embedding table's rows.
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (emb == nullptr) return make_error("model: missing tensor token_embd.weight");
  m->config_.n_vocab = static_cast<int32_t>(emb->n_rows());

  Result<std::unique_ptr<Buffer>> buf = backend.upload_weights(f.base() + f.data_offset(), f.size() - f.data_offset());
  if (!buf) return buf.error();
  m->weight_buffer_ = std::move(*buf);
  WeightBinder binder(f, m->weight_buffer_.get());
  if (Status s = m->arch_->bind_weights(binder, m->config_, m->weights_); !s) return s.error();

  auto check_type = [&](const Tensor& t) { return !t.valid() || backend.caps().supports_weight(t.type); };
  bool ok = check_type(m->weights_.tok_embd) && check_type(m->weights_.output);
  for (const LayerWeights& l : m->weights_.layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp,
                            &l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      ok = ok && check_type(*t);
  if (!ok) return make_error("model: a weight type is not supported by this backend");

  // The weights MatMul reads (every layer matrix and the output, which may be the embedding
  // table GetRows reads too, not an untied embedding table): the backend may give them a
  // layout of its own. The mapping's pages may go when the model came from a file.
  std::vector<Tensor> matmul_weights;
  for (const LayerWeights& l : m->weights_.layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp,
                            &l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      if (t->valid()) matmul_weights.push_back(*t);
  if (m->weights_.output.valid()) matmul_weights.push_back(m->weights_.output);
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = backend.prepare_matmul_weights(matmul_weights, !f.path().empty()); !s)
    LOG_WARN("model: weights kept in their file layout: " + s.error().message);
  LOG_DEBUG("model: weights prepared for " + backend.info().kind + " in " +
            std::to_string(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()) +
            " ms");
  return m;
}

int64_t ForwardBatch::n_tokens() const {
  int64_t n = 0;
  for (const SeqChunk& sc : seqs) n += static_cast<int64_t>(sc.tokens.size());
  return n;
}

namespace {

// The integer inputs of a batch, with each chunk's slots from slots_of(chunk).
BatchLayout layout_batch(Graph& g, const ForwardBatch& batch, IntSpan positions, auto slots_of) {
  BatchLayout b;
  b.n = batch.n_tokens();
  b.positions = positions;
  std::vector<int32_t> new_slots;
  for (const SeqChunk& sc : batch.seqs) {
    const std::span<const int32_t> own = slots_of(sc).subspan(sc.first_pos, sc.tokens.size());
    new_slots.insert(new_slots.end(), own.begin(), own.end());
  }
  b.new_slots = g.add_ints(new_slots);
  int64_t row = 0;
  for (const SeqChunk& sc : batch.seqs) {
    AttnSeq as;
    as.row0 = row;
    as.n = static_cast<int64_t>(sc.tokens.size());
    as.positions = IntSpan{positions.offset + static_cast<uint32_t>(row), static_cast<uint32_t>(as.n)};
    as.kv_slots = g.add_ints(slots_of(sc).subspan(0, sc.first_pos + as.n));
    b.seqs.push_back(as);
    row += as.n;
  }
  return b;
}

}  // namespace

void Model::build_forward(Graph& g, const ForwardBatch& batch, const Activations& act, const KvTensors& kv) const {
  const ModelConfig& c = config_;
  std::vector<int32_t> tokens, positions;
  for (const SeqChunk& sc : batch.seqs) {
    tokens.insert(tokens.end(), sc.tokens.begin(), sc.tokens.end());
    for (size_t i = 0; i < sc.tokens.size(); ++i) positions.push_back(sc.first_pos + static_cast<int32_t>(i));
  }
  const IntSpan tok_span = g.add_ints(tokens);
  const IntSpan pos_span = g.add_ints(positions);
  const BatchLayout b = layout_batch(g, batch, pos_span, [](const SeqChunk& sc) { return sc.kv_slots; });
  // Sliding-window layers read through their own slots where a chunk has them.
  const bool own_sliding =
      std::ranges::any_of(batch.seqs, [](const SeqChunk& sc) { return !sc.sliding_slots.empty(); });
  const std::optional<BatchLayout> own =
      own_sliding ? std::optional(layout_batch(
                        g, batch, pos_span,
                        [](const SeqChunk& sc) { return sc.sliding_slots.empty() ? sc.kv_slots : sc.sliding_slots; }))
                  : std::nullopt;
  const BatchLayout& b_sliding = own ? *own : b;
  const int64_t n = b.n;

  Op embed{OpKind::GetRows};
  embed.dst = ops::rows(act.x, n);
  embed.src0 = weights_.tok_embd;
  embed.ia = tok_span;
  embed.f0 = c.embed_scale;
  g.ops.push_back(embed);

  for (int il = 0; il < c.n_layer; ++il) {
    arch_->build_layer(g, c, weights_.layers[il], il, c.layer_sliding(il) ? b_sliding : b, act, kv.k[il], kv.v[il]);
  }

  if (batch.logit_rows.empty()) return;
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  Op pick{OpKind::CopyRows};
  pick.dst = ops::rows(act.cur, n_out);
  pick.src0 = act.x;
  pick.ia = g.add_ints(batch.logit_rows);
  g.ops.push_back(pick);
  ops::rms_norm(g, ops::rows(act.cur, n_out), ops::rows(act.cur, n_out), weights_.output_norm, c.rms_eps);
  ops::matmul(g, ops::rows(act.logits, n_out), weights_.output, ops::rows(act.cur, n_out));
  if (c.final_softcap > 0.0f) {
    Op cap{OpKind::Softcap};
    cap.dst = cap.src0 = ops::rows(act.logits, n_out);
    cap.f0 = c.final_softcap;
    g.ops.push_back(cap);
  }
}

namespace ops {

Tensor rows(const Tensor& t, int64_t n) {
  return t.slice_rows(0, n);
}

void rms_norm(Graph& g, const Tensor& dst, const Tensor& src, const Tensor& weight, float eps) {
  Op op{OpKind::RmsNorm};
  op.dst = dst;
  op.src0 = src;
  op.src1 = weight;
  op.f0 = eps;
  g.ops.push_back(op);
}

void matmul(Graph& g, const Tensor& dst, const Tensor& w, const Tensor& x) {
  Op op{OpKind::MatMul};
  op.dst = dst;
  op.src0 = w;
  op.src1 = x;
  g.ops.push_back(op);
}

void rope(Graph& g, const Tensor& x, IntSpan positions, int32_t head_dim, int32_t n_rot, int32_t layout, float base,
          float pos_scale) {
  Op op{OpKind::Rope};
  op.dst = x;
  op.ia = positions;
  op.i0 = head_dim;
  op.i1 = n_rot;
  op.i2 = layout;
  op.f0 = base;
  op.f1 = pos_scale;
  g.ops.push_back(op);
}

void add(Graph& g, const Tensor& dst, const Tensor& a, const Tensor& b) {
  Op op{OpKind::Add};
  op.dst = dst;
  op.src0 = a;
  op.src1 = b;
  g.ops.push_back(op);
}

void add_row(Graph& g, const Tensor& dst, const Tensor& a, const Tensor& row) {
  Op op{OpKind::AddRow};
  op.dst = dst;
  op.src0 = a;
  op.src1 = row;
  g.ops.push_back(op);
}

void scale(Graph& g, const Tensor& dst, const Tensor& src, float f) {
  Op op{OpKind::Scale};
  op.dst = dst;
  op.src0 = src;
  op.f0 = f;
  g.ops.push_back(op);
}

void gated(Graph& g, OpKind kind, const Tensor& dst, const Tensor& gate, const Tensor& up) {
  Op op{kind};
  op.dst = dst;
  op.src0 = gate;
  op.src1 = up;
  g.ops.push_back(op);
}

void store_kv(Graph& g, const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache, IntSpan slots) {
  Op op{OpKind::StoreKv};
  op.src0 = k;
  op.src1 = v;
  op.src2 = k_cache;
  op.src3 = v_cache;
  op.ia = slots;
  g.ops.push_back(op);
}

void attention(Graph& g, const Tensor& dst, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const BatchLayout& b, const ModelConfig& c, int32_t window) {
  for (const AttnSeq& s : b.seqs) {
    Op op{OpKind::Attention};
    op.dst = dst.slice_rows(s.row0, s.n);
    op.src0 = q.slice_rows(s.row0, s.n);
    op.src2 = k_cache;
    op.src3 = v_cache;
    op.ia = s.positions;
    op.ib = s.kv_slots;
    op.i0 = c.n_head;
    op.i1 = c.n_head_kv;
    op.i2 = c.head_dim;
    op.i3 = window;
    op.f0 = c.attn_scale;
    op.f1 = c.attn_softcap;
    g.ops.push_back(op);
  }
}

}  // namespace ops
}  // namespace hearth
