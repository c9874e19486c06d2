#include "tests/tools/synthetic_model.h"

#include <cmath>

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
  Builder(uint64_t seed, DType type) : rng_(seed), type_(type) {}
  gguf::Writer& w() { return w_; }

  // A [rows, cols] matrix (ne = {cols, rows}) of N(0, std^2) entries in the matrix type.
  void matrix(const std::string& name, int64_t cols, int64_t rows, float std) {
    add(name, type_, cols, rows, [&] { return std * rng_.normal(); });
  }
  // A norm weight or a bias: offset + spread * N(0, 1), F32 (llama.cpp wants them in F32).
  void norm(const std::string& name, int64_t n, float offset, float spread) {
    add(name, DType::F32, n, 1, [&] { return offset + spread * rng_.normal(); });
  }

 private:
  template <class F>
  void add(const std::string& name, DType type, int64_t cols, int64_t rows, F next) {
    std::vector<float> row(static_cast<size_t>(cols));
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = next();
      cpu::quantize_row(type, row.data(), data.data() + rb * static_cast<size_t>(r), cols);
    }
    std::vector<int64_t> ne{cols};
    if (rows > 1) ne.push_back(rows);
    w_.add_tensor(name, type, ne, std::move(data));
  }

  Rng rng_;
  DType type_;
  gguf::Writer w_;
};

}  // namespace

SyntheticShape synthetic_shape(const std::string& arch) {
  return {arch == "gemma3" ? 6 : 2, 128, 4, 2, 32, 192, 320};
}

bool parse_synthetic_type(const std::string& name, DType* out) {
  if (name == "f32")
    *out = DType::F32;
  else if (name == "f16")
    *out = DType::F16;
  else if (name == "q8_0")
    *out = DType::Q8_0;
  else if (name == "q4_0")
    *out = DType::Q4_0;
  else
    return false;
  return true;
}

Result<std::vector<uint8_t>> make_synthetic_model(const SyntheticOptions& o) {
  if (o.arch != "llama" && o.arch != "gemma3" && o.arch != "qwen2")
    return make_error("synthetic model: unknown arch '" + o.arch + "' (llama, gemma3 or qwen2)");
  if (o.type != DType::F32 && o.type != DType::F16 && o.type != DType::Q8_0 && o.type != DType::Q4_0)
    return make_error("synthetic model: weight type must be f32, f16, q8_0 or q4_0");
  const SyntheticShape s = synthetic_shape(o.arch);
  const bool gemma = o.arch == "gemma3", qwen = o.arch == "qwen2";
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
  if (gemma) {
    w.set_f32(a + "rope.freq_base", 1000000.0f);  // global layers; sliding ones use 10000
    w.set_u32(a + "attention.sliding_window", 4);
  } else if (qwen) {
    w.set_f32(a + "rope.freq_base", 1000000.0f);
  } else {
    w.set_u32(a + "rope.dimension_count", s.head_dim);
    w.set_f32(a + "rope.freq_base", 10000.0f);
    w.set_u32(a + "vocab_size", s.n_vocab);
  }

  const Vocab v = make_vocab(o.arch, s.n_vocab);
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
  // Gemma's converters write the key (false); llama files usually omit it (llama.cpp: true).
  if (gemma) w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);

  // Scales: matrices 1/sqrt(fan-in) keep activations O(1); Gemma multiplies embeddings by
  // sqrt(n_embd), so its table is drawn that much smaller. Logits come out with std ~1-2.
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const int32_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  b.matrix("token_embd.weight", s.n_embd, s.n_vocab, gemma ? in_std : 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    b.norm(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f);
    b.matrix(p + "attn_q.weight", s.n_embd, q_dim, in_std);
    b.matrix(p + "attn_k.weight", s.n_embd, kv_dim, in_std);
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
    b.matrix(p + "attn_output.weight", q_dim, s.n_embd, 1.0f / std::sqrt(static_cast<float>(q_dim)));
    if (gemma) b.norm(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.1f);
    b.norm(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f);
    b.matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, in_std);
    b.matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, in_std);
    b.matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
    if (gemma) b.norm(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.1f);
  }
  b.norm("output_norm.weight", s.n_embd, 1.0f, 0.1f);
  // Gemma and the small Qwen2 tie the output to the embeddings; llama gets its own projection.
  if (!gemma && !qwen) b.matrix("output.weight", s.n_embd, s.n_vocab, 2.0f * in_std);
  return w.serialize();
}

}  // namespace hearth::test
