#include "engine/scheduler/draft_model.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"
#include "engine/scheduler/speculation.h"

namespace hearth {
namespace {

// The most probable token of a row of logits and its softmax probability.
struct Top {
  int32_t id = 0;
  float p = 0;
};
Top top_of(std::span<const float> logits) {
  Top t;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(t.id)]) t.id = static_cast<int32_t>(i);
  const double max = logits[static_cast<size_t>(t.id)];
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  t.p = static_cast<float>(1.0 / sum);
  return t;
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

}  // namespace

Status check_same_vocab(const Tokenizer& target, const std::string& target_name, const Tokenizer& draft,
                        const std::string& draft_name) {
  const std::string pair = "the draft model " + draft_name + " does not share the tokenizer of " + target_name + ": ";
  if (target.n_vocab() != draft.n_vocab())
    return make_error(pair + "its vocabulary has " + std::to_string(draft.n_vocab()) + " tokens, the target's " +
                      std::to_string(target.n_vocab()));
  if (target.bos_id() != draft.bos_id() || target.eos_id() != draft.eos_id())
    return make_error(pair + "BOS/EOS ids " + std::to_string(draft.bos_id()) + "/" + std::to_string(draft.eos_id()) +
                      " against the target's " + std::to_string(target.bos_id()) + "/" +
                      std::to_string(target.eos_id()));
  for (int32_t id = 0; id < target.n_vocab(); ++id)
    if (target.piece(id) != draft.piece(id))
      return make_error(pair + "token " + std::to_string(id) + " is " + quoted(draft.piece(id)) +
                        " in the draft model and " + quoted(target.piece(id)) + " in the target");
  return {};
}

uint64_t draft_kv_bytes(const ModelConfig& c, int32_t n_ctx, int32_t n_parallel) {
  const uint64_t tokens = static_cast<uint64_t>(std::max(0, n_ctx) + Speculator::kMaxDraft);
  const uint64_t row = 2 * static_cast<uint64_t>(std::max(0, c.kv_dim()));  // F16: 2 bytes an element
  return static_cast<uint64_t>(std::max(0, n_parallel)) * 2 * static_cast<uint64_t>(std::max(0, c.n_layer)) * tokens *
         row;
}

DraftState::DraftState(const DraftModel& owner) : owner_(owner) {
  ++owner_.n_states_;
}
DraftState::~DraftState() {
  --owner_.n_states_;
}

Result<std::shared_ptr<DraftModel>> DraftModel::create(const Model& target, const Tokenizer& target_tok,
                                                       const Model& draft, const Tokenizer& draft_tok, Backend& backend,
                                                       float p_min) {
  if (Status s = check_same_vocab(target_tok, target.config().name, draft_tok, draft.config().name); !s)
    return s.error();
  return std::shared_ptr<DraftModel>(
      new DraftModel(draft, backend, target.config().n_vocab, target_tok.eog_ids(), p_min));
}

// Makes the state's cache hold tokens[0 .. len - 1) and run the last one, so its logits
// give the first guess. The cache holds a prefix of `tokens` (the kept tokens only grow),
// so only what it lacks runs; the pending token runs again after each proposal.
Status DraftModel::catch_up(DraftState& st, std::span<const int32_t> tokens, int32_t n_ctx, int32_t& n_run) const {
  if (!st.ctx_) {
    ContextOptions co;
    co.n_ctx = n_ctx + Speculator::kMaxDraft;  // the kept tokens and one proposal's guesses
    co.n_batch = 128;                          // the prompt runs in chunks of this many tokens
    Result<std::unique_ptr<InferenceContext>> ctx = InferenceContext::create(model_, backend_, co);
    if (!ctx) return ctx.error();
    st.ctx_ = std::move(*ctx);
  }
  const int32_t keep = std::min(st.ctx_->n_past(), static_cast<int32_t>(tokens.size()) - 1);
  st.ctx_->rewind(keep);
  n_run = static_cast<int32_t>(tokens.size()) - keep;
  return st.ctx_->eval(tokens.subspan(static_cast<size_t>(keep)));
}

DraftModel::Proposal DraftModel::propose(std::unique_ptr<DraftState>& state, std::span<const int32_t> tokens, int32_t k,
                                         int32_t n_ctx) const {
  Proposal p;
  std::vector<int32_t>& out = p.tokens;
  if (k <= 0 || tokens.empty() || (state && state->failed_)) return p;
  if (!state) state = std::make_unique<DraftState>(*this);
  DraftState& st = *state;
  Status s = catch_up(st, tokens, n_ctx, p.n_caught_up);
  p.n_passes = 1;
  while (s) {
    const Top t = top_of(st.ctx_->logits_row(0));
    // An end-of-generation guess ends the answer whether kept or not: its row would be wasted.
    if (t.p < p_min_ || t.id >= n_vocab_target_ || std::binary_search(eog_.begin(), eog_.end(), t.id)) break;
    out.push_back(t.id);
    if (static_cast<int32_t>(out.size()) == k) break;
    s = st.ctx_->eval(std::span<const int32_t>(&out.back(), 1));
    ++p.n_passes;
  }
  if (!s) {
    LOG_WARN("draft model " + model_.config().name + ": " + s.error().message + "; this answer goes on without it");
    st.failed_ = true;
    st.ctx_.reset();
    return p;
  }
  st.ctx_->rewind(static_cast<int32_t>(tokens.size()));  // the guesses are not history
  return p;
}

}  // namespace hearth
