// A request's sampling over a model's defaults (engine/sampling/defaults.h): each field the
// request set is its own, each it left out the model's, the rest the API's.
#include <catch2/catch.hpp>

#include "engine/sampling/defaults.h"

using namespace hearth;

namespace {

// Qwen2.5's published values.
const SamplingDefaults kModel{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .repetition_penalty = 1.05f};

// An OpenAI request's starting point (ipc/api/openai_request.cpp).
SamplingParams openai_base() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  return p;
}

}  // namespace

TEST_CASE("a request that sets no sampling field samples with the model's defaults") {
  const SamplingParams p = with_model_defaults(openai_base(), 0, kModel);
  CHECK(p.temperature == 0.7f);
  CHECK(p.top_k == 20);
  CHECK(p.top_p == 0.8f);
  CHECK(p.repetition_penalty == 1.05f);
  CHECK(p.min_p == 0.0f);         // the model names none: the API's
  CHECK(p.penalty_last_n == 64);  // likewise
  CHECK(p.validate().ok());
}

TEST_CASE("a request's own fields override the model's defaults, one by one") {
  SamplingParams req = openai_base();
  req.temperature = 1.3f;
  req.top_k = 5;
  const SamplingParams p = with_model_defaults(req, kSetTemperature | kSetTopK, kModel);
  CHECK(p.temperature == 1.3f);
  CHECK(p.top_k == 5);
  CHECK(p.top_p == 0.8f);
  CHECK(p.repetition_penalty == 1.05f);
}

TEST_CASE("an explicit temperature 0 is plain greedy: none of the model's defaults, its penalty neither") {
  SamplingParams req = openai_base();
  req.temperature = 0.0f;
  const SamplingParams p = with_model_defaults(req, kSetTemperature, kModel);
  CHECK(p.temperature == 0.0f);
  CHECK(p.repetition_penalty == 1.0f);
  CHECK_FALSE(p.penalties_enabled());
  // A penalty the request asks for itself still applies.
  req.repetition_penalty = 1.2f;
  CHECK(with_model_defaults(req, kSetTemperature | kSetRepetitionPenalty, kModel).repetition_penalty == 1.2f);
}

TEST_CASE("a model without defaults leaves the request as the API made it") {
  SamplingParams req = openai_base();
  const SamplingParams p = with_model_defaults(req, 0, SamplingDefaults{});
  CHECK(p.temperature == 1.0f);
  CHECK(p.top_k == 0);
  CHECK(p.repetition_penalty == 1.0f);
}

TEST_CASE("defaults out of range are found by validate_defaults") {
  CHECK(validate_defaults(kModel).ok());
  SamplingDefaults bad;
  bad.top_p = 1.5f;
  const Status s = validate_defaults(bad);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("top_p") != std::string::npos);
}
