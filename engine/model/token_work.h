// What one token costs in a model's weights, for reporting achieved GOP/s and GB/s next to
// the machine's peaks: prefill is bound by the multiply-adds of the layers' matrices,
// decode by reading every matrix once per step.
#pragma once

#include "engine/gguf/gguf.h"

namespace hearth {

struct TokenWork {
  // 2 ops per weight of the layers' 2-D matrices (embeddings and output projection aside:
  // a prompt token is embedded by a lookup and prefill takes logits of its last token only).
  double prefill_ops = 0;
  // Bytes of the 2-D matrices a decode step reads: the layers and the output projection
  // (the tied embeddings when there is no output.weight). KV reads are left out.
  // Mixture-of-experts stacks (qwen3moe's ffn_*_exps) count in both for the share a token
  // uses, expert_used_count / expert_count: the active parameters. (A decode step reads
  // that much; a prefill pass reads each expert chosen by any of its tokens once.)
  double decode_bytes = 0;
};

TokenWork token_work(const gguf::File& file);

}  // namespace hearth
