#include "tests/tools/synthetic_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "backends/cpu/quant_ref.h"
#include "engine/gguf/writer.h"

namespace hearth::test {
namespace {

// splitmix64: a small, portable generator (https://prng.di.unimi.it/splitmix64.c).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Approximately N(0, 1): the sum of 12 uniform 24-bit fractions minus 6 (Irwin-Hall).
  // Integer arithmetic until one final rounding, so every platform gets the same floats.
  float normal() {
    int64_t sum = 0;
    for (int i = 0; i < 12; ++i) sum += static_cast<int64_t>(next() >> 40);
    return static_cast<float>(static_cast<double>(sum - 6 * (int64_t{1} << 24)) / double(int64_t{1} << 24));
  }
  // Approximately N(0, 1) from one draw, for the large shapes: the sum of four uniform
  // 16-bit integers (Irwin-Hall, n = 4), centred and scaled to unit variance.
  float fast_normal() {
    const uint64_t z = next();
    const int64_t sum = static_cast<int64_t>((z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48));
    // 2 * sum - 4 * 65535 has mean 0 and standard deviation ~131072 / sqrt(3).
    return static_cast<float>(static_cast<double>(2 * sum - 4 * 65535) * (1.7320508075688772 / 131072.0));
  }

 private:
  uint64_t s_;
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte
  int32_t bos = 0, eos = 0, unk = 0, pad = -1;
};

// <unk> <s> </s> (llama) or <pad> <eos> <bos> <unk> (gemma), the 256 byte tokens, then
// letters and common English merges with scores that prefer longer, earlier pieces.
Vocab make_vocab(const std::string& arch, int32_t n_vocab) {
  Vocab v;
  auto add = [&](std::string t, float score, int32_t type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  if (arch == "gemma3") {
    add("<pad>", 0, 3);
    add("<eos>", 0, 3);
    add("<bos>", 0, 3);
    add("<unk>", 0, 2);
    v.pad = 0, v.eos = 1, v.bos = 2, v.unk = 3;
  } else {
    add("<unk>", 0, 2);
    add("<s>", 0, 3);
    add("</s>", 0, 3);
    v.unk = 0, v.bos = 1, v.eos = 2;
  }
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6);
  const std::string sp = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  static const char* kMerges[] = {"the", "he", "in", "er", "an", "on", "re",  "at", "en", "es", "or",
                                  "ed",  "nd", "is", "it", "ar", "ou", "ing", "al", "as", "le"};
  static const char* kWords[] = {"",  "t", "a", "th",  "the", "s",  "w",  "o",  "b",  "c",
                                 "f", "m", "p", "and", "of",  "to", "in", "is", "it", "on"};
  float score = -1;
  for (const char* w : kWords) add(sp + w, score--, 1);
  for (const char* m : kMerges) add(m, score--, 1);
  for (char c = 'a'; c <= 'z' && static_cast<int32_t>(v.tokens.size()) < n_vocab; ++c)
    add(std::string(1, c), score--, 1);
  for (int i = 0; static_cast<int32_t>(v.tokens.size()) < n_vocab; ++i) add(std::to_string(i), score--, 1);
  v.tokens.resize(n_vocab), v.scores.resize(n_vocab), v.types.resize(n_vocab);
  return v;
}

class Builder {
 public:
  Builder(uint64_t seed, DType type) : rng_(seed), seed_(seed), type_(type) {}
  gguf::Writer& w() { return w_; }

  // A [rows, cols] matrix (ne = {cols, rows}) of N(0, std^2) entries in the matrix type.
  void matrix(const std::string& name, int64_t cols, int64_t rows, float std) {
    matrix_of(type_, name, cols, rows, std);
  }
  void matrix_of(DType type, const std::string& name, int64_t cols, int64_t rows, float std) {
    add(name, type, cols, rows, [&] { return std * rng_.normal(); });
  }
  // A norm weight or a bias: offset + spread * N(0, 1), F32 (llama.cpp wants them in F32).
  void norm(const std::string& name, int64_t n, float offset, float spread) {
    add(name, DType::F32, n, 1, [&] { return offset + spread * rng_.normal(); });
  }
  // n_expert [n_out, n_in] matrices stacked as llama.cpp's [n_in, n_out, n_expert] tensor.
  void experts(const std::string& name, DType type, int64_t n_in, int64_t n_out, int64_t n_expert, float std) {
    add(name, type, n_in, n_out * n_expert, [&] { return std * rng_.normal(); }, {n_in, n_out, n_expert});
  }

  // The large shapes' generator: a [rows, cols] tensor of offset + spread * fast_normal() in
  // `type`. Rows come in chunks of kChunkRows, each drawn from its own generator (seeded by
  // the seed, the tensor's number and the chunk's), so threads can share a tensor's chunks
  // and the bytes are the same for any number of threads.
  void fast(const std::string& name, DType type, int64_t cols, int64_t rows, float offset, float spread,
            std::vector<int64_t> ne = {}) {
    constexpr int64_t kChunkRows = 64;
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
    const int64_t n_chunks = (rows + kChunkRows - 1) / kChunkRows;
    const uint64_t tensor_seed = Rng(seed_ ^ (0xD1B54A32D192ED03ull * ++n_fast_)).next();
    std::atomic<int64_t> next_chunk{0};
    auto work = [&] {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t c; (c = next_chunk.fetch_add(1)) < n_chunks;) {
        Rng rng(tensor_seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(c));
        for (int64_t r = c * kChunkRows; r < std::min(rows, (c + 1) * kChunkRows); ++r) {
          for (float& x : row) x = offset + spread * rng.fast_normal();
          cpu::quantize_row(type, row.data(), data.data() + rb * static_cast<size_t>(r), cols);
        }
      }
    };
    const int64_t n_threads = std::min<int64_t>(
        {n_chunks, std::max(1u, std::thread::hardware_concurrency()), rows * cols >= (int64_t{1} << 20) ? 16 : 1});
    std::vector<std::thread> threads;
    for (int64_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    if (ne.empty()) ne.push_back(cols);
    if (ne.size() == 1 && rows > 1) ne.push_back(rows);
    w_.add_tensor(name, type, ne, std::move(data));
  }

 private:
  template <class F>
  void add(const std::string& name, DType type, int64_t cols, int64_t rows, F next, std::vector<int64_t> ne = {}) {
    std::vector<float> row(static_cast<size_t>(cols));
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = next();
      cpu::quantize_row(type, row.data(), data.data() + rb * static_cast<size_t>(r), cols);
    }
    if (ne.empty()) ne.push_back(cols);
    if (ne.size() == 1 && rows > 1) ne.push_back(rows);
    w_.add_tensor(name, type, ne, std::move(data));
  }

  Rng rng_;
  uint64_t seed_;
  uint64_t n_fast_ = 0;  // tensors drawn by fast()
  DType type_;
  gguf::Writer w_;
};

// The tokenizer keys of a "llama" (SentencePiece-style) vocabulary, in the order the tiny
// models' fixture hashes pin: the tokens, their scores and types, the special ids, BOS on and
// EOS off.
void write_llama_vocab(gguf::Writer& w, const Vocab& v) {
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

bool is_k_quant(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// The tiny shape: the generator as it has always been (fixtures pin these files' hashes).
Result<std::vector<uint8_t>> make_tiny(const SyntheticOptions& o) {
  if (is_k_quant(o.type))
    return make_error(
        "synthetic model: k-quant types need the gemma3-270m shape (the tiny shape's rows are "
        "shorter than a 256-element block)");
  const SyntheticShape s = synthetic_shape(o.arch);
  const bool gemma = o.arch == "gemma3", qwen = o.arch == "qwen2", moe = o.arch == "qwen3moe";
  const bool qwen3 = o.arch == "qwen3" || moe;
  const std::string a = o.arch + ".";
  Builder b(o.seed, o.type);
  gguf::Writer& w = b.w();

  w.set_string("general.architecture", o.arch);
  w.set_string("general.name", "hearth synthetic " + o.arch);
  w.set_u32(a + "context_length", 256);
  w.set_u32(a + "embedding_length", s.n_embd);
  w.set_u32(a + "block_count", s.n_layer);
  w.set_u32(a + "feed_forward_length", s.n_ff);
  w.set_u32(a + "attention.head_count", s.n_head);
  w.set_u32(a + "attention.head_count_kv", s.n_head_kv);
  w.set_u32(a + "attention.key_length", s.head_dim);
  w.set_u32(a + "attention.value_length", s.head_dim);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (moe) {
    w.set_u32(a + "expert_count", s.n_expert);
    w.set_u32(a + "expert_used_count", s.n_expert_used);
    w.set_u32(a + "expert_feed_forward_length", s.n_ff_exp);
  }
  if (gemma) {
    w.set_f32(a + "rope.freq_base", 1000000.0f);  // global layers; sliding ones use 10000
    w.set_u32(a + "attention.sliding_window", 4);
  } else if (qwen || qwen3) {
    w.set_f32(a + "rope.freq_base", 1000000.0f);
  } else {
    w.set_u32(a + "rope.dimension_count", s.head_dim);
    w.set_f32(a + "rope.freq_base", 10000.0f);
    w.set_u32(a + "vocab_size", s.n_vocab);
  }

  write_llama_vocab(w, make_vocab(o.arch, s.n_vocab));
  // Gemma's converters write the key (false); llama files usually omit it (llama.cpp: true).
  if (gemma) w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);
  for (const auto& [key, value] : o.extra_f32) w.set_f32(key, value);
  for (const auto& [key, value] : o.extra_i32) w.set_i32(key, value);

  // Scales: matrices 1/sqrt(fan-in) keep activations O(1); Gemma multiplies embeddings by
  // sqrt(n_embd), so its table is drawn that much smaller. Logits come out with std ~1-2.
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const int32_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  b.matrix("token_embd.weight", s.n_embd, s.n_vocab, gemma ? in_std : 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    b.norm(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f);
    // qwen3's Q and K come out ~3x too large, as a model trained with Q/K norms may: only
    // the per-head norms bring them back, so a forward pass without them is far off.
    b.matrix(p + "attn_q.weight", s.n_embd, q_dim, qwen3 ? 3.0f * in_std : in_std);
    b.matrix(p + "attn_k.weight", s.n_embd, kv_dim, qwen3 ? 3.0f * in_std : in_std);
    b.matrix(p + "attn_v.weight", s.n_embd, kv_dim, in_std);
    if (qwen) {
      // Biases about half the size of the projections' outputs (~1): large enough that a
      // forward pass without them is far off.
      b.norm(p + "attn_q.bias", q_dim, 0.0f, 0.5f);
      b.norm(p + "attn_k.bias", kv_dim, 0.0f, 0.5f);
      b.norm(p + "attn_v.bias", kv_dim, 0.0f, 0.5f);
    }
    if (gemma) {
      b.norm(p + "attn_q_norm.weight", s.head_dim, 1.0f, 0.1f);
      b.norm(p + "attn_k_norm.weight", s.head_dim, 1.0f, 0.1f);
    }
    if (qwen3) {
      b.norm(p + "attn_q_norm.weight", s.head_dim, 1.0f, 0.3f);
      b.norm(p + "attn_k_norm.weight", s.head_dim, 1.0f, 0.3f);
    }
    b.matrix(p + "attn_output.weight", q_dim, s.n_embd, 1.0f / std::sqrt(static_cast<float>(q_dim)));
    if (gemma) b.norm(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.1f);
    b.norm(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f);
    if (moe) {
      b.matrix_of(DType::F32, p + "ffn_gate_inp.weight", s.n_embd, s.n_expert, 2.0f * in_std);
      b.experts(p + "ffn_gate_exps.weight", o.type, s.n_embd, s.n_ff_exp, s.n_expert, in_std);
      b.experts(p + "ffn_up_exps.weight", o.type, s.n_embd, s.n_ff_exp, s.n_expert, in_std);
      b.experts(p + "ffn_down_exps.weight", o.type, s.n_ff_exp, s.n_embd, s.n_expert,
                1.0f / std::sqrt(static_cast<float>(s.n_ff_exp)));
      continue;
    }
    b.matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, in_std);
    b.matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, in_std);
    b.matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
    if (gemma) b.norm(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.1f);
  }
  b.norm("output_norm.weight", s.n_embd, 1.0f, 0.1f);
  // Gemma and the small Qwen2 tie the output to the embeddings; llama and qwen3 (as the 8B
  // and larger files) get their own projection.
  if (!gemma && !qwen) b.matrix("output.weight", s.n_embd, s.n_vocab, 2.0f * in_std);
  return w.serialize();
}

constexpr SyntheticShape kGemma3_270m = {18, 640, 4, 1, 256, 2048, 262144};
constexpr SyntheticShape kQwen3_30b_a3b = {48, 2048, 32, 4, 128, 6144, 151936, 128, 8, 768};

// llama.cpp's use_more_bits: the layers whose attn_v and ffn_down its Q4_K_M/Q5_K_M recipes
// give Q6_K: the first and last eighth, and every third layer between.
bool use_more_bits(int il, int n_layer) {
  return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

enum class Role { Embeddings, AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown };

// A matrix's type in the gemma3-270m shape (see synthetic_model.h).
DType gemma3_270m_type(DType chosen, Role role, int il, int n_layer, int64_t cols) {
  DType t = chosen;
  if (chosen == DType::Q4_K) {  // Q4_K_M; the embeddings are the (tied) output, which gets Q6_K
    if (role == Role::Embeddings || ((role == Role::AttnV || role == Role::FfnDown) && use_more_bits(il, n_layer)))
      t = DType::Q6_K;
  }
  if (is_k_quant(t) && cols % dtype_info(t).block_elems != 0) {  // llama.cpp's fallbacks
    if (t == DType::Q4_K) t = DType::Q5_0;
    if (t == DType::Q5_K) t = DType::Q5_1;
    if (t == DType::Q6_K) t = DType::Q8_0;
  }
  return t;
}

// llama.cpp's general.file_type (llama_ftype) for a file of mostly `t`: Q4_K is the Q4_K_M
// mix, Q5_K the plain one (Q5_K_S), Q6_K 18.
uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q4_K:
      return 15;
    case DType::Q5_K:
      return 16;
    case DType::Q6_K:
      return 18;
    default:
      return 0;
  }
}

// Gemma 3 270M's shapes and metadata, keys and tensors in the real file's order (so the
// tensors' offsets are the real file's as well), with random weights.
Result<std::vector<uint8_t>> make_gemma3_270m(const SyntheticOptions& o) {
  if (o.arch != "gemma3") return make_error("synthetic model: the gemma3-270m shape needs arch gemma3");
  const SyntheticShape s = kGemma3_270m;
  const std::string a = "gemma3.";
  Builder b(o.seed, o.type);
  gguf::Writer& w = b.w();

  w.set_string("general.architecture", "gemma3");
  w.set_string("general.type", "model");
  w.set_string("general.name", "hearth synthetic gemma3-270m");
  w.set_string("general.size_label", "270M");
  w.set_u32(a + "context_length", 32768);
  w.set_u32(a + "embedding_length", s.n_embd);
  w.set_u32(a + "block_count", s.n_layer);
  w.set_u32(a + "feed_forward_length", s.n_ff);
  w.set_u32(a + "attention.head_count", s.n_head);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32(a + "attention.key_length", s.head_dim);
  w.set_u32(a + "attention.value_length", s.head_dim);
  // Global layers; the real file has no rope.freq_base_swa (sliding layers: 1e4) and no
  // sliding_window_pattern (every 6th layer global), and neither has this one.
  w.set_f32(a + "rope.freq_base", 1000000.0f);
  w.set_u32(a + "attention.sliding_window", 512);
  w.set_u32(a + "attention.head_count_kv", s.n_head_kv);

  const Vocab v = make_vocab("gemma3", s.n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_sep_token", false);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", file_type_of(o.type));

  // Scales as in the tiny shape: 1/sqrt(fan-in), embeddings sqrt(n_embd) smaller.
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const int32_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  auto matrix = [&](const std::string& name, Role role, int il, int64_t cols, int64_t rows, float std) {
    b.fast(name, gemma3_270m_type(o.type, role, il, s.n_layer, cols), cols, rows, 0.0f, std);
  };
  auto norm = [&](const std::string& name, int64_t n) { b.fast(name, DType::F32, n, 1, 1.0f, 0.1f); };
  norm("output_norm.weight", s.n_embd);
  matrix("token_embd.weight", Role::Embeddings, 0, s.n_embd, s.n_vocab, in_std);
  for (int il = 0; il < s.n_layer; ++il) {  // alphabetical within a block, as the real file
    const std::string p = "blk." + std::to_string(il) + ".";
    matrix(p + "attn_k.weight", Role::AttnK, il, s.n_embd, kv_dim, in_std);
    norm(p + "attn_k_norm.weight", s.head_dim);
    norm(p + "attn_norm.weight", s.n_embd);
    matrix(p + "attn_output.weight", Role::AttnOutput, il, q_dim, s.n_embd,
           1.0f / std::sqrt(static_cast<float>(q_dim)));
    matrix(p + "attn_q.weight", Role::AttnQ, il, s.n_embd, q_dim, in_std);
    norm(p + "attn_q_norm.weight", s.head_dim);
    matrix(p + "attn_v.weight", Role::AttnV, il, s.n_embd, kv_dim, in_std);
    matrix(p + "ffn_down.weight", Role::FfnDown, il, s.n_ff, s.n_embd, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
    matrix(p + "ffn_gate.weight", Role::FfnGate, il, s.n_embd, s.n_ff, in_std);
    norm(p + "ffn_norm.weight", s.n_embd);
    matrix(p + "ffn_up.weight", Role::FfnUp, il, s.n_embd, s.n_ff, in_std);
    norm(p + "post_attention_norm.weight", s.n_embd);
    norm(p + "post_ffw_norm.weight", s.n_embd);
  }
  return w.serialize();
}

// Qwen3-30B-A3B's shape (synthetic_model.h), its first o.n_layer layers.
Result<std::vector<uint8_t>> make_qwen3_30b_a3b(const SyntheticOptions& o) {
  if (o.arch != "qwen3moe") return make_error("synthetic model: the qwen3-30b-a3b shape needs arch qwen3moe");
  SyntheticShape s = kQwen3_30b_a3b;
  if (o.n_layer < 0 || o.n_layer > s.n_layer) return make_error("synthetic model: qwen3-30b-a3b has 1 to 48 layers");
  if (o.n_layer > 0) s.n_layer = o.n_layer;
  const std::string a = "qwen3moe.";
  Builder b(o.seed, o.type);
  gguf::Writer& w = b.w();
  w.set_string("general.architecture", "qwen3moe");
  w.set_string("general.name", "hearth synthetic qwen3-30b-a3b");
  w.set_u32(a + "block_count", s.n_layer);
  w.set_u32(a + "context_length", 40960);
  w.set_u32(a + "embedding_length", s.n_embd);
  w.set_u32(a + "feed_forward_length", s.n_ff);
  w.set_u32(a + "attention.head_count", s.n_head);
  w.set_u32(a + "attention.head_count_kv", s.n_head_kv);
  w.set_f32(a + "rope.freq_base", 1000000.0f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32(a + "expert_used_count", s.n_expert_used);
  w.set_u32(a + "attention.key_length", s.head_dim);
  w.set_u32(a + "attention.value_length", s.head_dim);
  w.set_u32(a + "expert_count", s.n_expert);
  w.set_u32(a + "expert_feed_forward_length", s.n_ff_exp);
  write_llama_vocab(w, make_vocab("qwen3moe", s.n_vocab));
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", file_type_of(o.type));

  const bool q4km = o.type == DType::Q4_K;
  auto type_of = [&](bool more_bits_role, int il) {
    return q4km && more_bits_role && use_more_bits(il, s.n_layer) ? DType::Q6_K : o.type;
  };
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const int32_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  auto norm = [&](const std::string& name, int64_t n) { b.fast(name, DType::F32, n, 1, 1.0f, 0.1f); };
  b.fast("token_embd.weight", o.type, s.n_embd, s.n_vocab, 0.0f, 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    norm(p + "attn_norm.weight", s.n_embd);
    b.fast(p + "attn_q.weight", o.type, s.n_embd, q_dim, 0.0f, in_std);
    b.fast(p + "attn_k.weight", o.type, s.n_embd, kv_dim, 0.0f, in_std);
    b.fast(p + "attn_v.weight", type_of(true, il), s.n_embd, kv_dim, 0.0f, in_std);
    norm(p + "attn_q_norm.weight", s.head_dim);
    norm(p + "attn_k_norm.weight", s.head_dim);
    b.fast(p + "attn_output.weight", o.type, q_dim, s.n_embd, 0.0f, 1.0f / std::sqrt(static_cast<float>(q_dim)));
    norm(p + "ffn_norm.weight", s.n_embd);
    b.fast(p + "ffn_gate_inp.weight", DType::F32, s.n_embd, s.n_expert, 0.0f, 2.0f * in_std);
    const int64_t e = s.n_expert, ff = s.n_ff_exp;
    b.fast(p + "ffn_gate_exps.weight", o.type, s.n_embd, ff * e, 0.0f, in_std, {s.n_embd, ff, e});
    b.fast(p + "ffn_up_exps.weight", o.type, s.n_embd, ff * e, 0.0f, in_std, {s.n_embd, ff, e});
    b.fast(p + "ffn_down_exps.weight", type_of(true, il), ff, s.n_embd * e, 0.0f,
           1.0f / std::sqrt(static_cast<float>(ff)), {ff, s.n_embd, e});
  }
  norm("output_norm.weight", s.n_embd);
  b.fast("output.weight", q4km ? DType::Q6_K : o.type, s.n_embd, s.n_vocab, 0.0f, 2.0f * in_std);
  return w.serialize();
}

}  // namespace

SyntheticShape synthetic_shape(const std::string& arch) {
  // qwen3's heads are wider than n_embd / n_head, as Qwen3-0.6B's (16 x 128 over 1024).
  if (arch == "qwen3moe") return {3, 128, 4, 2, 64, 192, 320, 8, 3, 64};
  return {arch == "gemma3" ? 6 : 2, 128, 4, 2, arch == "qwen3" ? 64 : 32, 192, 320};
}

bool synthetic_shape(const std::string& arch, const std::string& shape, SyntheticShape* out) {
  if (shape == "tiny")
    *out = synthetic_shape(arch);
  else if (shape == "gemma3-270m" && arch == "gemma3")
    *out = kGemma3_270m;
  else if (shape == "qwen3-30b-a3b" && arch == "qwen3moe")
    *out = kQwen3_30b_a3b;
  else
    return false;
  return true;
}

bool parse_synthetic_type(const std::string& name, DType* out) {
  static const struct {
    const char* name;
    DType type;
  } kTypes[] = {{"f32", DType::F32},   {"f16", DType::F16},   {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0},
                {"q4_1", DType::Q4_1}, {"q5_0", DType::Q5_0}, {"q5_1", DType::Q5_1}, {"q4_k", DType::Q4_K},
                {"q5_k", DType::Q5_K}, {"q6_k", DType::Q6_K}};
  for (const auto& t : kTypes) {
    if (name == t.name) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

Result<std::vector<uint8_t>> make_synthetic_model(const SyntheticOptions& o) {
  if (o.arch != "llama" && o.arch != "gemma3" && o.arch != "qwen2" && o.arch != "qwen3" && o.arch != "qwen3moe")
    return make_error("synthetic model: unknown arch '" + o.arch + "' (llama, gemma3, qwen2, qwen3 or qwen3moe)");
  switch (o.type) {
    case DType::F32:
    case DType::F16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      break;
    default:
      return make_error(
          "synthetic model: weight type must be f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k "
          "or q6_k");
  }
  if (o.shape == "tiny") return make_tiny(o);
  if (o.shape == "gemma3-270m") return make_gemma3_270m(o);
  if (o.shape == "qwen3-30b-a3b") return make_qwen3_30b_a3b(o);
  return make_error("synthetic model: unknown shape '" + o.shape + "' (tiny, gemma3-270m or qwen3-30b-a3b)");
}

}  // namespace hearth::test
