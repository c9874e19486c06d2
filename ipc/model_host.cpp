#include "ipc/model_host.h"

#include <algorithm>

#include "engine/sampling/grammar.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth::ipc {

namespace {

// Each token's bytes as the grammar matches them; control tokens (turn markers, end of
// generation) are "": the grammar never writes them, but for the end-of-generation tokens
// where it may end.
std::shared_ptr<GrammarCompiler> grammar_compiler(const Tokenizer& tokenizer) {
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    if (!tokenizer.is_control(id)) vocab[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  return std::make_shared<GrammarCompiler>(std::move(vocab), tokenizer.n_vocab(), tokenizer.eog_ids());
}

}  // namespace

std::shared_ptr<const EngineRef> make_engine_ref(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model,
                                                 std::shared_ptr<const void> owner) {
  auto ref = std::make_shared<EngineRef>();
  ref->scheduler = scheduler;
  ref->tokenizer = tokenizer;
  ref->model = std::move(model);
  ref->n_ctx = scheduler->options().n_ctx;
  if (ref->model.n_ctx > 0) ref->n_ctx = std::min(ref->n_ctx, ref->model.n_ctx);
  ref->grammars = grammar_compiler(*tokenizer);
  ref->owner = std::move(owner);
  return ref;
}

}  // namespace hearth::ipc
