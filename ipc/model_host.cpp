#include "ipc/model_host.h"

#include <algorithm>

#include "engine/scheduler/scheduler.h"
#include "engine/scheduler/token_loop.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth::ipc {

std::shared_ptr<const EngineRef> make_engine_ref(Scheduler* scheduler, const Tokenizer* tokenizer, ModelInfo model,
                                                 std::shared_ptr<const void> owner) {
  auto ref = std::make_shared<EngineRef>();
  ref->scheduler = scheduler;
  ref->tokenizer = tokenizer;
  ref->model = std::move(model);
  ref->n_ctx = scheduler->options().n_ctx;
  if (ref->model.n_ctx > 0) ref->n_ctx = std::min(ref->n_ctx, ref->model.n_ctx);
  ref->grammars = grammar_compiler_for(*tokenizer);
  ref->owner = std::move(owner);
  return ref;
}

}  // namespace hearth::ipc
