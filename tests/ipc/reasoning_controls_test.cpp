// How each API asks a thinking model to think, not to, or to think within a budget (issue
// 42): OpenAI's reasoning_effort (as llama-server reads it for a template with only
// enable_thinking) and llama-server's thinking_budget_tokens, Anthropic's thinking with
// budget_tokens; the budget reaches the engine as a ReasoningLimit closing Qwen3's block.
// The engine's side: tests/engine/reasoning_budget_test.cpp.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/api/anthropic.h"
#include "ipc/api/openai.h"
#include "tests/tools/synthetic_model.h"

using namespace hearth;
using namespace hearth::ipc;
using json = nlohmann::ordered_json;

namespace {

// A tiny synthetic model with a template of the given family, served by no scheduler:
// make_job() needs only the tokenizer and the template.
struct ThinkingEngine {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const EngineRef> engine;
  explicit ThinkingEngine(ChatFamily family) {
    test::SyntheticOptions o;
    o.arch = "qwen3";
    bytes = std::move(*test::make_synthetic_model(o));
    file = std::move(*gguf::File::from_memory(bytes.data(), bytes.size()));
    tokenizer = std::move(*Tokenizer::from_gguf(*file));
    auto ref = std::make_shared<EngineRef>();
    ref->tokenizer = tokenizer.get();
    ref->model.id = "synthetic-qwen3";
    ref->model.n_ctx = 256;
    ref->model.chat_template = ChatTemplate{family};
    ref->n_ctx = 256;
    engine = std::move(ref);
  }
};

// What a request to path with these fields becomes: the job, or the error response.
std::variant<GenerationJob, HttpResponse> submit(const ThinkingEngine& e, const char* path, json fields) {
  fields["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  if (std::string(path) == "/v1/messages") fields["max_tokens"] = 64;
  HttpRequest request;
  request.method = "POST";
  request.target = path;
  request.body = fields.dump();
  RouteContext ctx;
  const Call call{request, ctx, fields, e.engine, ""};
  RouteResult result = std::string(path) == "/v1/messages" ? anthropic_messages(call) : openai_chat(call);
  if (auto* job = std::get_if<GenerationJob>(&result)) return std::move(*job);
  REQUIRE(std::holds_alternative<HttpResponse>(result));
  return std::get<HttpResponse>(result);
}

GenerationJob job(const ThinkingEngine& e, const char* path, json fields) {
  auto r = submit(e, path, std::move(fields));
  if (auto* resp = std::get_if<HttpResponse>(&r)) FAIL(resp->status << " " << resp->body);
  return std::move(std::get<GenerationJob>(r));
}

HttpResponse refused(const ThinkingEngine& e, const char* path, json fields) {
  auto r = submit(e, path, std::move(fields));
  REQUIRE(std::holds_alternative<HttpResponse>(r));
  return std::get<HttpResponse>(r);
}

// Whether the rendered prompt asks not to think: Qwen3's generation prompt then carries an
// empty block.
bool prompt_thinks(const ThinkingEngine& e, const GenerationJob& j) {
  return e.tokenizer->decode(j.request.prompt).find("<think>\n\n</think>") == std::string::npos;
}

}  // namespace

TEST_CASE("reasoning_effort none turns a Qwen3 template's thinking off, any other level leaves it on") {
  const ThinkingEngine e(ChatFamily::Qwen3);
  CHECK(prompt_thinks(e, job(e, "/v1/chat/completions", json::object())));
  CHECK_FALSE(prompt_thinks(e, job(e, "/v1/chat/completions", {{"reasoning_effort", "none"}})));
  for (const char* level : {"minimal", "low", "medium", "high", "xhigh"})
    CHECK(prompt_thinks(e, job(e, "/v1/chat/completions", {{"reasoning_effort", level}})));
  CHECK_FALSE(
      prompt_thinks(e, job(e, "/v1/chat/completions",
                           {{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", false}}}})));
}

TEST_CASE("a reasoning_effort that is no level, or that contradicts enable_thinking, is a 400 naming it") {
  const ThinkingEngine e(ChatFamily::Qwen3);
  for (const json& bad : {json("extreme"), json(""), json(5), json(true)}) {
    const HttpResponse r = refused(e, "/v1/chat/completions", {{"reasoning_effort", bad}});
    CHECK(r.status == 400);
    CHECK(r.body.find("reasoning_effort") != std::string::npos);
  }
  const HttpResponse r =
      refused(e, "/v1/chat/completions",
              {{"reasoning_effort", "high"}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  CHECK(r.status == 400);
  CHECK(r.body.find("contradicts") != std::string::npos);
}

TEST_CASE("a thinking budget becomes the engine's bound, closing Qwen3's block with its own text") {
  const ThinkingEngine e(ChatFamily::Qwen3);
  const std::vector<int32_t> close = e.tokenizer->encode("\n</think>\n\n", false, true);
  const GenerationJob openai = job(e, "/v1/chat/completions", {{"thinking_budget_tokens", 40}});
  CHECK(openai.request.reasoning.max_tokens == 40);
  CHECK(openai.request.reasoning.close_tokens == close);
  CHECK(openai.request.reasoning.bounded());
  const GenerationJob anthropic =
      job(e, "/v1/messages", {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}});
  CHECK(anthropic.request.reasoning.max_tokens == 1024);
  CHECK(anthropic.request.reasoning.close_tokens == close);
  // No budget, thinking off, or a budget of -1: unbounded.
  CHECK_FALSE(job(e, "/v1/chat/completions", json::object()).request.reasoning.bounded());
  CHECK_FALSE(job(e, "/v1/chat/completions", {{"thinking_budget_tokens", -1}}).request.reasoning.bounded());
  CHECK_FALSE(job(e, "/v1/chat/completions", {{"thinking_budget_tokens", 40}, {"reasoning_effort", "none"}})
                  .request.reasoning.bounded());
  CHECK_FALSE(job(e, "/v1/messages", {{"thinking", {{"type", "disabled"}}}}).request.reasoning.bounded());
  CHECK_FALSE(job(e, "/v1/messages", {{"thinking", {{"type", "adaptive"}}}}).request.reasoning.bounded());
}

TEST_CASE("a template that does not think ignores reasoning_effort and a budget, as llama-server does") {
  const ThinkingEngine e(ChatFamily::ChatML);
  const GenerationJob j = job(e, "/v1/chat/completions", {{"reasoning_effort", "high"}, {"thinking_budget_tokens", 8}});
  CHECK_FALSE(j.request.reasoning.bounded());
}

TEST_CASE("thinking budgets out of range are a 400 naming the field") {
  const ThinkingEngine e(ChatFamily::Qwen3);
  for (const json& bad : {json(-2), json("10"), json(1.5), json(4294967296LL)})
    CHECK(refused(e, "/v1/chat/completions", {{"thinking_budget_tokens", bad}}).body.find("thinking_budget_tokens") !=
          std::string::npos);
  for (const json& thinking : {json{{"type", "enabled"}}, json{{"type", "enabled"}, {"budget_tokens", 0}},
                               json{{"type", "enabled"}, {"budget_tokens", "9"}}}) {
    const HttpResponse r = refused(e, "/v1/messages", {{"thinking", thinking}});
    CHECK(r.status == 400);
    CHECK(r.body.find("budget_tokens") != std::string::npos);
  }
}
