// Pieces of hearth-run shared by its generation and benchmark modes.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
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
  DType kv_type = DType::F16;
};

int run_bench(Loaded& l, const std::string& model_path, const BenchOptions& o);

// hearth-run --read-probe: every variant of the memory read probe (common/probe/read_probe.h)
// on `threads` threads (0: every CPU), as a table or JSON; nothing is cached.
int run_read_probe(int threads, bool json);

}  // namespace hearth
