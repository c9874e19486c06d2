// A real model file loaded for a test: the GGUF, a CPU backend, the model and its tokenizer.
// Apart from tests/test_util.h because it needs the engine, which most tests do not link.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace hearth::test {

struct LoadedModel {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;  // the CPU, 2 threads
  std::unique_ptr<Model> model;      // weights on `backend`
  std::unique_ptr<Tokenizer> tok;
};

// The model at `path` (default: Gemma 3 270M, gemma_model_path()) on a 2-thread CPU backend,
// or nullopt after a WARN that the test is skipped when no path is given (not installed). A
// file that is there but does not load fails the test with the loader's message.
inline std::optional<LoadedModel> load_test_model(const std::string& path = gemma_model_path()) {
  if (path.empty()) {
    WARN("default model not installed; skipped");
    return std::nullopt;
  }
  INFO(path);
  LoadedModel m;
  auto file = gguf::File::open(path);
  if (!file.ok()) FAIL(file.error().message);
  m.file = std::move(*file);
  m.backend = cpu::make_cpu_backend({2});
  auto model = Model::load(m.file, *m.backend);
  if (!model.ok()) FAIL(model.error().message);
  m.model = std::move(*model);
  auto tok = Tokenizer::from_gguf(*m.file);
  if (!tok.ok()) FAIL(tok.error().message);
  m.tok = std::move(*tok);
  return m;
}

}  // namespace hearth::test
