#include "engine/sampling/grammar.h"

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "engine/sampling/json_schema.h"

namespace hearth {

namespace {

using json = nlohmann::ordered_json;

// Whitespace the grammar allows in a row inside JSON: enough for any indentation a model
// writes, and a stop to the runs of blank lines small models fall into under a JSON mask.
constexpr int kMaxWhitespace = 24;

// xgrammar compiles a grammar's token masks on this many threads.
int compile_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

// The compile call's exceptions (bad schema, bad structural tag, internal checks) as errors.
template <class F>
Result<std::shared_ptr<const CompiledGrammar>> guarded(F&& compile) {
  try {
    return compile();
  } catch (const std::exception& e) {
    return make_error(e.what());
  }
}

// A schema ready for the grammar (json_schema.h), parsed for embedding in a structural tag.
Result<json> parse_schema(std::string_view schema) {
  Result<std::string> ready = schema_for_grammar(schema);
  if (!ready) return ready.error();
  return json::parse(*ready);
}

}  // namespace

class CompiledGrammar {
 public:
  explicit CompiledGrammar(xgrammar::CompiledGrammar g) : grammar(std::move(g)) {}
  xgrammar::CompiledGrammar grammar;
};

struct GrammarCompiler::Impl {
  Impl(std::vector<std::string> vocab, int32_t n_vocab, std::vector<int32_t> stop_ids)
      : vocab(std::move(vocab)), n_vocab(n_vocab), stop_ids(std::move(stop_ids)) {}

  // The xgrammar compiler, made on the first compile (sorting the vocabulary takes a while
  // for 150k tokens; models that never see a constrained request never pay it). Its own
  // cache keeps compiled grammars by their source, so an agent's tool list resent every turn
  // compiles once. It is bounded (least recently used go first): every distinct schema a
  // client sends would otherwise stay in memory for as long as the model is loaded.
  xgrammar::GrammarCompiler& compiler() {
    std::call_once(once, [this] {
      xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, n_vocab, stop_ids);
      xg.emplace(info, compile_threads(), /*cache_enabled=*/true, kCacheBytes);
      vocab.clear();
      vocab.shrink_to_fit();
    });
    return *xg;
  }

  static constexpr int64_t kCacheBytes = int64_t{256} << 20;
  std::vector<std::string> vocab;
  int32_t n_vocab;
  std::vector<int32_t> stop_ids;
  std::once_flag once;
  std::optional<xgrammar::GrammarCompiler> xg;
  std::mutex compile_mutex;  // one compile at a time: it uses every core already
};

GrammarCompiler::GrammarCompiler(std::vector<std::string> vocab, int32_t n_vocab, std::vector<int32_t> stop_ids)
    : n_vocab_(std::max<int32_t>(n_vocab, static_cast<int32_t>(vocab.size()))),
      impl_(std::make_unique<Impl>(std::move(vocab), n_vocab_, std::move(stop_ids))) {}

GrammarCompiler::~GrammarCompiler() = default;

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::json_object() {
  return json_schema(R"({"type": "object"})");
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::json_schema(std::string_view schema) {
  Result<std::string> ready = schema_for_grammar(schema);
  if (!ready) return ready.error();
  return guarded([&]() -> Result<std::shared_ptr<const CompiledGrammar>> {
    std::lock_guard<std::mutex> lock(impl_->compile_mutex);
    return std::make_shared<const CompiledGrammar>(impl_->compiler().CompileJSONSchema(
        *ready, /*any_whitespace=*/true, std::nullopt, std::nullopt, /*strict_mode=*/true, kMaxWhitespace));
  });
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::triggered(const std::vector<TriggeredTag>& tags,
                                                                          bool at_least_one, bool stop_after_first) {
  json triggers = json::array(), items = json::array();
  for (const TriggeredTag& t : tags) {
    if (t.begin.compare(0, t.trigger.size(), t.trigger) != 0 || t.trigger.empty())
      return make_error("a tag's trigger must be a non-empty prefix of its begin");
    Result<json> schema = parse_schema(t.schema);
    if (!schema) return schema.error();
    if (std::find(triggers.begin(), triggers.end(), t.trigger) == triggers.end()) triggers.push_back(t.trigger);
    items.push_back(
        {{"type", "tag"},
         {"begin", t.begin},
         {"content",
          {{"type", "json_schema"}, {"json_schema", std::move(*schema)}, {"max_whitespace_cnt", kMaxWhitespace}}},
         {"end", t.end}});
  }
  const json tag{{"type", "structural_tag"},
                 {"format",
                  {{"type", "triggered_tags"},
                   {"triggers", triggers},
                   {"tags", items},
                   {"at_least_one", at_least_one},
                   {"stop_after_first", stop_after_first}}}};
  return guarded([&]() -> Result<std::shared_ptr<const CompiledGrammar>> {
    std::lock_guard<std::mutex> lock(impl_->compile_mutex);
    return std::make_shared<const CompiledGrammar>(impl_->compiler().CompileStructuralTag(tag.dump()));
  });
}

struct GrammarMatcher::Impl {
  explicit Impl(std::shared_ptr<const CompiledGrammar> g)
      : grammar(std::move(g)),
        matcher(grammar->grammar),
        n_vocab(grammar->grammar.GetTokenizerInfo().GetVocabSize()),
        bitmask(static_cast<size_t>(xgrammar::GetBitmaskSize(n_vocab))) {}

  std::shared_ptr<const CompiledGrammar> grammar;
  xgrammar::GrammarMatcher matcher;
  int32_t n_vocab;
  std::vector<int32_t> bitmask;  // bit i of word i / 32: token i allowed
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : impl_(std::make_unique<Impl>(std::move(grammar))) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::mask(float* logits, int32_t n_vocab) {
  Impl& m = *impl_;
  int64_t shape = static_cast<int64_t>(m.bitmask.size());
  DLTensor t{};
  t.data = m.bitmask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = &shape;
  m.matcher.FillNextTokenBitmask(&t);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int32_t n = std::min(n_vocab, m.n_vocab);
  for (int32_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = static_cast<uint32_t>(m.bitmask[static_cast<size_t>(w)]);
    if (bits == 0xFFFFFFFFu) continue;
    const int32_t end = std::min(n, w * 32 + 32);
    for (int32_t i = w * 32; i < end; ++i)
      if (!((bits >> (i - w * 32)) & 1u)) logits[i] = kNegInf;
  }
  for (int32_t i = n; i < n_vocab; ++i) logits[i] = kNegInf;
}

bool GrammarMatcher::accept(int32_t token) {
  if (token < 0 || token >= impl_->n_vocab) return false;
  return impl_->matcher.AcceptToken(token);
}

bool GrammarMatcher::terminated() const {
  return impl_->matcher.IsTerminated();
}

}  // namespace hearth
