// Deterministic models for tests: random weights in a real architecture's layout, with a
// SentencePiece vocabulary, written with gguf::Writer. The default "tiny" shape is small;
// llama.cpp loads those files as well, so their logits can be compared with llama.cpp's
// (tests/reference/make_synthetic_fixtures.py). The "gemma3-270m" shape has the real
// Gemma 3 270M file's shapes (and, with Q4_K, its per-tensor types), for benchmarks on
// machines without the real file: the same tensors make the same work, so tokens/s match.
//
// Everything is a function of the options: the same options give the same bytes on every
// platform (integer random numbers, no libm), so a fixture can pin the file's content hash.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "common/result.h"

namespace hearth::test {

struct SyntheticOptions {
  std::string arch = "llama";  // "llama", "gemma3", "qwen2", "qwen3" or "qwen3moe"
  // "tiny" (any arch), "gemma3-270m" (arch gemma3 only) or "qwen3-30b-a3b" (arch qwen3moe only)
  std::string shape = "tiny";
  int32_t n_layer = 0;  // qwen3-30b-a3b: its first n_layer layers (0: all 48)
  uint64_t seed = 1;
  // Matrices: F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, and with the gemma3-270m shape also
  // Q4_K, Q5_K, Q6_K (see below); norms and biases are always F32.
  DType type = DType::F32;
  std::string chat_template;  // tokenizer.chat_template; "" = the key is absent
  // More metadata keys (the tiny shape), as llama.cpp's converter types them: F32 and I32
  // (general.sampling.temp, general.sampling.top_k, ...). Empty: none, the file unchanged.
  std::vector<std::pair<std::string, float>> extra_f32;
  std::vector<std::pair<std::string, int32_t>> extra_i32;
};

// The tiny shape (every architecture):
//   n_layer 2 (llama, qwen2, qwen3) / 6 (gemma3: layers 0-4 use a 4-token sliding window,
//   layer 5 is global), n_embd 128, n_head 4, n_head_kv 2 (grouped-query), head_dim 32 (qwen3:
//   64, so Q is wider than the residual stream, as in Qwen3-0.6B), n_ff 192,
//   n_vocab 320 = <unk>/<pad> <s>/<bos> </s>/<eos>, 256 byte tokens, 61 pieces.
// Per architecture, as the real files are: llama has its own output.weight, RoPE base 1e4;
// gemma3 ties the output to the embeddings; qwen2 has Q/K/V biases (F32), RoPE base 1e6
// (NEOX layout), no rope.dimension_count key, and ties the output to the embeddings (as
// the smaller Qwen2.5 files do; the 0.5B Coder file has its own, which llama covers); qwen3
// is qwen2 without the biases, with per-head Q/K RMSNorm weights (F32, head_dim), Q/K
// projections drawn 3x larger (only the norms bring them back), and its own output.weight;
// qwen3moe is qwen3 with 3 layers whose FFN is a mixture of 8 experts of width 64, 3 used
// per token: an F32 router blk.N.ffn_gate_inp (as llama.cpp's quantizer keeps it) drawn 2x
// larger, so a token's probabilities are far from uniform, and the stacks
// ffn_{gate,up,down}_exps ([n_in, n_out, 8]) in the matrix type.
//
// The gemma3-270m shape: the hyperparameters, metadata keys, tensor names, order, shapes
// and offsets of gemma-3-270m-q4_k_m.gguf (the default model): n_layer 18 (every 6th layer
// global, the others a 512-token sliding window), n_embd 640, n_head 4, n_head_kv 1, head_dim
// 256, n_ff 2048, n_vocab 262144 (<pad> <eos> <bos> <unk>, byte tokens, pieces, then
// numbers), RoPE base 1e6 (sliding layers: 1e4, the default), context 32768, output tied
// to the embeddings. Tensor types:
//   Q4_K: as in the real file (llama.cpp's Q4_K_M recipe): token_embd Q6_K, attn_v and
//     ffn_down Q6_K in the "more bits" layers (0 1 4 7 10 13 15 16 17), the rest Q4_K;
//   any other type: every matrix that type;
// then, as llama.cpp does, a K-quant matrix whose rows (640) are not a multiple of 256
// falls back: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0. So Q4_K gives the real file's
// Q8_0 embeddings, Q5_0 attn_q/k/v and ffn_gate/up, Q8_0 attn_v in the "more bits" layers,
// Q4_K attn_output, Q4_K/Q6_K ffn_down.
// Its weights come from a faster generator (one random number per weight, rows drawn in
// parallel, in chunks with their own seeds, so the bytes do not depend on the thread count):
// ~250 MB in a few seconds.
// The qwen3-30b-a3b shape: Qwen3-30B-A3B's hyperparameters (n_layer 48, n_embd 2048, n_head
// 32, n_head_kv 4, head_dim 128, n_ff 6144, 128 experts of width 768, 8 per token, n_vocab
// 151936, RoPE base 1e6, context 40960, its own output projection), or a slice of its first
// n_layer layers (a real file's 17 GB do not fit a test machine; the first layers are the
// same work per layer). Types: Q4_K is llama.cpp's Q4_K_M recipe (output Q6_K, attn_v and
// ffn_down_exps Q6_K in the "more bits" layers of the slice, the rest Q4_K, router F32);
// any other type: every matrix that type. Weights from the fast generator, as gemma3-270m.
struct SyntheticShape {
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // qwen3moe
};
SyntheticShape synthetic_shape(const std::string& arch);  // the tiny shape
// A shape by name; false for an unknown one or one the arch does not take.
bool synthetic_shape(const std::string& arch, const std::string& shape, SyntheticShape* out);

// The GGUF file's bytes; an error for an unknown arch, shape or type, or a combination the
// shape does not take (gemma3-270m with another arch, a K-quant with the tiny shape, whose
// rows are all shorter than a K-quant block).
Result<std::vector<uint8_t>> make_synthetic_model(const SyntheticOptions& options);

// "f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k" -> DType;
// false for anything else.
bool parse_synthetic_type(const std::string& name, DType* out);

}  // namespace hearth::test
