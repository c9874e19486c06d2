// Tiny deterministic models for tests: random weights in a real architecture's layout, with a
// small SentencePiece vocabulary, written with gguf::Writer. llama.cpp loads them as well, so
// their logits can be compared with llama.cpp's (tests/reference/make_synthetic_fixtures.py).
//
// Everything is a function of the options: the same options give the same bytes on every
// platform (integer random numbers, no libm), so a fixture can pin the file's content hash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/result.h"

namespace hearth::test {

struct SyntheticOptions {
  std::string arch = "llama";  // "llama", "gemma3" or "qwen2"
  uint64_t seed = 1;
  DType type = DType::F32;    // matrices (F32, F16, Q8_0, Q4_0); norms are always F32
  std::string chat_template;  // tokenizer.chat_template; "" = the key is absent
};

// Shapes of the synthetic models (every architecture):
//   n_layer 2 (llama, qwen2) / 6 (gemma3: layers 0-4 use a 4-token sliding window, layer 5
//   is global), n_embd 128, n_head 4, n_head_kv 2 (grouped-query), head_dim 32, n_ff 192,
//   n_vocab 320 = <unk>/<pad> <s>/<bos> </s>/<eos>, 256 byte tokens, 61 pieces.
// Per architecture, as the real files are: llama has its own output.weight, RoPE base 1e4;
// gemma3 ties the output to the embeddings; qwen2 has Q/K/V biases (F32), RoPE base 1e6
// (NEOX layout), no rope.dimension_count key, and ties the output to the embeddings (as
// the smaller Qwen2.5 files do; the 0.5B Coder file has its own, which llama covers).
struct SyntheticShape {
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
};
SyntheticShape synthetic_shape(const std::string& arch);

// The GGUF file's bytes; an error for an unknown arch or type.
Result<std::vector<uint8_t>> make_synthetic_model(const SyntheticOptions& options);

// "f32", "f16", "q8_0", "q4_0" <-> DType; false for anything else.
bool parse_synthetic_type(const std::string& name, DType* out);

}  // namespace hearth::test
