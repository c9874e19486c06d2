// What a speculative answer must keep, for the tests that compare answers with drafts (from
// the n-gram lookup or a draft model) against answers without them.
#pragma once

#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/engine/scheduler_fixture.h"

namespace hearth::test {

// Its text, finish, token ids and logprob bits (the chosen token's and the alternatives').
struct Answer {
  std::string text, finish_reason;
  std::vector<int32_t> ids;
  std::vector<uint32_t> logprob_bits;
  RequestUsage usage;
  RequestTimings timings;
  bool operator==(const Answer& o) const {
    return text == o.text && finish_reason == o.finish_reason && ids == o.ids && logprob_bits == o.logprob_bits &&
           usage.completion_tokens == o.usage.completion_tokens;
  }
};

inline Answer answer_of(Collector& c) {
  Answer a{c.text, c.end.finish_reason, {}, {}, c.end.usage, c.end.timings};
  for (const TokenLogprob& lp : c.logprobs) {
    a.ids.push_back(lp.token);
    a.logprob_bits.push_back(std::bit_cast<uint32_t>(lp.logprob));
    for (const TokenLogprob::Alternative& alt : lp.top) a.logprob_bits.push_back(std::bit_cast<uint32_t>(alt.logprob));
  }
  return a;
}

// Submits every request at once; each must finish.
inline std::vector<Answer> run_all(Scheduler& s, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::unique_ptr<Collector>> cs = submit_all(s, reqs);
  std::vector<Answer> out;
  for (auto& c : cs) {
    REQUIRE(c->wait());
    REQUIRE(c->end.kind == RequestEvent::Kind::Finished);
    out.push_back(answer_of(*c));
  }
  return out;
}
inline Answer run(Scheduler& s, const GenerationRequest& r) {
  return run_all(s, {r})[0];
}

// A greedy request with two alternatives' logprobs per token.
inline GenerationRequest request(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r = greedy(std::move(prompt), max_tokens);
  r.top_logprobs = 2;
  return r;
}

}  // namespace hearth::test
