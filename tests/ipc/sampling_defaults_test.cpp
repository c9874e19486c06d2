// A model's own sampling defaults at the API (issue 42): a request's omitted fields take the
// model's (read from the synthetic file's general.sampling.* keys), its own fields override
// them, temperature 0 stays greedy; /v1/models/{id} reports them.
#include "engine/model/sampling_defaults.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/model/catalog.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/api/anthropic_request.h"
#include "ipc/api/ollama_request.h"
#include "ipc/api/openai.h"
#include "tests/tools/synthetic_model.h"

using namespace hearth;
using namespace hearth::ipc;
using json = nlohmann::ordered_json;

namespace {

template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) FAIL(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

// A tiny synthetic model whose file recommends Qwen3's sampling, served by no scheduler:
// make_job() needs only the tokenizer and the template.
struct DefaultsEngine {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const EngineRef> engine;
  DefaultsEngine() {
    test::SyntheticOptions o;
    o.arch = "qwen2";
    o.extra_f32 = {{"general.sampling.temp", 0.6f},
                   {"general.sampling.top_p", 0.95f},
                   {"general.sampling.min_p", 0.0f},
                   {"general.sampling.penalty_repeat", 1.1f}};
    o.extra_i32 = {{"general.sampling.top_k", 20}};
    bytes = must(test::make_synthetic_model(o), "synthetic model");
    file = must(gguf::File::from_memory(bytes.data(), bytes.size()), "gguf");
    tokenizer = must(Tokenizer::from_gguf(*file), "tokenizer");
    ModelInfo info;
    info.id = "synthetic-defaults";
    info.arch = "qwen2";
    info.n_ctx = 256;
    info.chat_template = ChatTemplate{ChatFamily::ChatML};
    std::vector<std::string> warnings;
    info.sampling = model_sampling(*file, info.id, &warnings);
    REQUIRE(warnings.empty());
    auto ref = std::make_shared<EngineRef>();  // no scheduler: nothing is submitted
    ref->tokenizer = tokenizer.get();
    ref->model = std::move(info);
    ref->n_ctx = 256;
    engine = std::move(ref);
  }
};

// The sampling parameters an OpenAI chat request with these fields is submitted with.
SamplingParams openai_sampling(const DefaultsEngine& e, json fields) {
  fields["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  HttpRequest request;
  request.method = "POST";
  request.target = "/v1/chat/completions";
  request.body = fields.dump();
  RouteContext ctx;
  const Call call{request, ctx, fields, e.engine, ""};
  RouteResult result = openai_chat(call);
  REQUIRE(std::holds_alternative<GenerationJob>(result));
  return std::get<GenerationJob>(result).request.sampling;
}

}  // namespace

TEST_CASE("an OpenAI request that omits the sampling fields samples with the model file's defaults") {
  const DefaultsEngine e;
  const SamplingParams p = openai_sampling(e, json::object());
  CHECK(p.temperature == 0.6f);
  CHECK(p.top_p == 0.95f);
  CHECK(p.top_k == 20);
  CHECK(p.min_p == 0.0f);
  CHECK(p.repetition_penalty == 1.1f);
}

TEST_CASE("an OpenAI request's own sampling fields override the model's defaults") {
  const DefaultsEngine e;
  const SamplingParams p = openai_sampling(e, json{{"temperature", 1.5}, {"top_k", 3}, {"repetition_penalty", 1.0}});
  CHECK(p.temperature == 1.5f);
  CHECK(p.top_k == 3);
  CHECK(p.repetition_penalty == 1.0f);
  CHECK(p.top_p == 0.95f);  // not given: the model's
}

TEST_CASE("temperature 0 or top_p 0 in a request is greedy whatever the model recommends") {
  const DefaultsEngine e;
  for (const json& fields : {json{{"temperature", 0}}, json{{"top_p", 0}}}) {
    const SamplingParams p = openai_sampling(e, fields);
    CHECK(p.temperature == 0.0f);
    CHECK_FALSE(p.penalties_enabled());
  }
}

TEST_CASE("Ollama's options and Anthropic's fields record which sampling fields the request set") {
  auto ollama = std::get<OllamaRequest>(parse_ollama_request(
      OllamaEndpoint::Chat,
      nlohmann::json::parse(R"({"model":"m","messages":[],"options":{"top_k":7,"repeat_last_n":32}})")));
  CHECK(ollama.sampling_given == (kSetTopK | kSetPenaltyLastN));
  auto anthropic = std::get<ApiRequest>(parse_anthropic_request(
      nlohmann::json::parse(R"({"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"temperature":0.2})"),
      AnthropicPurpose::Message));
  CHECK(anthropic.sampling_given == kSetTemperature);
  const DefaultsEngine e;
  const SamplingParams p =
      with_model_defaults(anthropic.sampling, anthropic.sampling_given, e.engine->model.sampling.defaults);
  CHECK(p.temperature == 0.2f);
  CHECK(p.top_k == 20);
}

TEST_CASE("/v1/models reports the sampling defaults in force") {
  const DefaultsEngine e;
  HostedModel hosted;
  hosted.id = "synthetic-defaults";
  hosted.loaded = true;
  const json j = model_object(hosted, e.engine.get());
  const json& d = j.at("meta").at("sampling_defaults");
  CHECK(d.at("source") == "gguf");
  CHECK(d.at("temperature") == 0.6);
  CHECK(d.at("top_k") == 20);
  CHECK(d.at("top_p") == 0.95);
  CHECK(d.at("min_p") == 0.0);
  CHECK(d.at("repetition_penalty") == 1.1);
  CHECK_FALSE(d.contains("penalty_last_n"));
  // An unloaded model: what the listing read from its file.
  hosted.loaded = false;
  hosted.sampling = catalog_sampling("qwen3:8b");
  const json u = model_object(hosted, nullptr).at("meta").at("sampling_defaults");
  CHECK(u.at("source") == "catalog");
  CHECK(u.at("no_thinking").at("temperature") == 0.7);
}

TEST_CASE("a thinking model asked not to think samples with its publisher's no-thinking values") {
  DefaultsEngine e;
  auto qwen3 = std::make_shared<EngineRef>(*e.engine);
  qwen3->model.chat_template = ChatTemplate{ChatFamily::Qwen3};
  qwen3->model.sampling.no_thinking = SamplingDefaults{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f};
  e.engine = qwen3;
  CHECK(openai_sampling(e, json::object()).temperature == 0.6f);  // thinking: the file's
  const SamplingParams off = openai_sampling(e, json{{"chat_template_kwargs", {{"enable_thinking", false}}}});
  CHECK(off.temperature == 0.7f);
  CHECK(off.top_p == 0.8f);
  // An answer held by a grammar from its first token is rendered without thinking too.
  const SamplingParams held = openai_sampling(e, json{{"response_format", {{"type", "json_object"}}}});
  CHECK(held.temperature == 0.7f);
}
