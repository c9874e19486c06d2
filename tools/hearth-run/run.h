// Pieces of hearth-run shared by its generation and benchmark modes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/generate.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"

namespace hearth {

struct Loaded {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;  // loaded for generation; the bench needs none
};

struct BenchOptions {
  int pp = 512;    // prompt tokens per prefill test (0 = skip)
  int tg = 128;    // generated tokens per decode test (0 = skip)
  int ubatch = 0;  // prompt tokens per forward pass of the prefill test (0: 512)
  int reps = 3;
  bool json = false;
  bool reprobe = false;  // measure this machine's peaks again (else the cached ones)
  int threads = 0;       // CPU threads the backend runs (0: every core), for the probes
  int ops_steps = 0;     // decode steps timed op by op after the tests (0: none; decode_ops.h)
  int ops_context = -1;  // tokens of context before those steps (-1: tg)
  DType kv_type = DType::F16;
};

int run_bench(Loaded& l, const std::string& model_path, const BenchOptions& o);

// hearth-run --draft-model (speculate.cpp): the draft model's file, weights (on the target's
// backend) and tokenizer, bound to the target as its drafter.
struct LoadedDraft {
  std::string path;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<DraftModel> bound;
};
// The draft model `arg` names (as -m does) for the target l (its tokenizer loaded); an error
// naming both files when their vocabularies differ.
Result<std::unique_ptr<LoadedDraft>> load_draft(const Loaded& target, const std::string& target_path,
                                                const std::string& arg);
// A scheduler of one sequence of n_ctx tokens for l, speculative with `draft` (null: off).
Result<std::unique_ptr<Scheduler>> one_sequence_scheduler(const Loaded& l, int32_t n_ctx, DType kv_type,
                                                          std::shared_ptr<const DraftModel> draft);
// Runs r on s, handing each Text event to on_text (may be empty; false cancels); returns
// the Finished event (usage, timings).
using EventCallback = std::function<bool(const RequestEvent&)>;
Result<RequestEvent> run_request(Scheduler& s, GenerationRequest r, const EventCallback& on_text);
// --bench --draft-model: decode tok/s through the scheduler without and with drafts, and
// the drafts verified and kept (l's tokenizer loaded).
int bench_drafts(const Loaded& l, const LoadedDraft& d, const BenchOptions& o);

// hearth-run --read-probe: every variant of the memory read probe (common/probe/read_probe.h)
// on `threads` threads (0: every CPU), as a table or JSON; nothing is cached.
int run_read_probe(int threads, bool json);

}  // namespace hearth
