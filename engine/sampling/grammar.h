// Constrained decoding (issue 40): a grammar compiled for one model's vocabulary, and one
// matcher per sequence that masks the logits to the tokens the grammar allows next. The
// mask is applied to the logits after the forward pass, so the backends and batch invariance
// are untouched; end of generation is allowed only where the grammar may end.
//
// xgrammar (Apache-2.0; the grammar engine of vLLM, SGLang and TensorRT-LLM) does the work:
// JSON Schema to grammar, and per-state token masks precomputed at compile time, so a mask
// costs tens of microseconds. It stays behind this header.
//
// Thread-safety: a GrammarCompiler may be used from any thread (compiles are serialized);
// a CompiledGrammar is immutable and shared; a GrammarMatcher belongs to one sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth {

class CompiledGrammar;  // opaque: xgrammar's compiled grammar with its token masks

// One structured region inside free text (a tool call): once `trigger` appears in the
// output, the rest of `begin` is forced, then a JSON value fitting `schema`, then `end`.
// trigger must be a prefix of begin.
struct TriggeredTag {
  std::string trigger;
  std::string begin;
  std::string schema;  // a JSON Schema, as JSON text
  std::string end;
};

class GrammarCompiler {
 public:
  // vocab[i]: token i's bytes, "" for control tokens (never allowed); n_vocab >= vocab.size():
  // the model's logits row (ids past vocab are never allowed); stop_ids: the end-of-
  // generation tokens, allowed only where the grammar may end.
  GrammarCompiler(std::vector<std::string> vocab, int32_t n_vocab, std::vector<int32_t> stop_ids);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Any JSON object (OpenAI's response_format json_object, Ollama's format "json").
  Result<std::shared_ptr<const CompiledGrammar>> json_object();
  // JSON that fits the schema (JSON text). An error names the schema's problem: not JSON,
  // invalid, or a keyword the grammar cannot enforce (json_schema.h).
  Result<std::shared_ptr<const CompiledGrammar>> json_schema(std::string_view schema);
  // Free text in which each tag's trigger starts that tag (tool calls). at_least_one: the
  // output is tags only, one or more (no text before, between or after them but
  // whitespace); stop_after_first: nothing may follow the first tag.
  Result<std::shared_ptr<const CompiledGrammar>> triggered(const std::vector<TriggeredTag>& tags, bool at_least_one,
                                                           bool stop_after_first);

  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Impl;
  int32_t n_vocab_;
  std::unique_ptr<Impl> impl_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // logits[i] = -inf for every token the grammar does not allow next. logits: [n_vocab],
  // the compiler's n_vocab.
  void mask(float* logits, int32_t n_vocab);
  // Moves past token; false (and no change) when the grammar does not allow it.
  bool accept(int32_t token);
  // The grammar has ended: a stop token was accepted where it may end.
  bool terminated() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
