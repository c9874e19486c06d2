// Speculative decoding's promises: the n-gram drafter proposes what followed the latest
// match; a sequence's drafting adapts and pauses when it loses; and through the scheduler,
// an answer with drafts is the answer without them — the same token ids and the same
// logprob bits, greedy or seeded, alone or beside others, after a prompt-cache hit — while
// the block pool and the prompt cache (memory and disk) end exactly as they do without.
#include "engine/scheduler/speculation.h"

#include <catch2/catch.hpp>

#include "engine/sampling/grammar.h"
#include "engine/scheduler/token_loop.h"
#include "tests/engine/scheduler_fixture.h"
#include "tests/engine/spec_answer.h"
#include "tests/test_model.h"

using namespace hearth;
using namespace hearth::test;

namespace {

using Spec = SchedulerOptions::Speculative;

std::unique_ptr<Scheduler> scheduler(Fixture& f, Spec spec, int32_t n_parallel = 4) {
  SchedulerOptions so = options();
  so.n_parallel = n_parallel;
  so.speculative = spec;
  return std::move(*Scheduler::create(*f.model, *f.backend, *f.tok, so));
}

// A prompt that repeats itself (what drafts from the prompt predict), and one that does not.
std::vector<int32_t> repetitive(uint32_t seed) {
  std::vector<int32_t> p = random_prompt(24, seed), out = p;
  for (int i = 0; i < 2; ++i) out.insert(out.end(), p.begin() + 1, p.end());
  return out;
}

}  // namespace

TEST_CASE("the n-gram drafter proposes what followed the latest, longest match") {
  const std::vector<int32_t> t{1, 5, 6, 7, 8, 9, 5, 6, 7, 3, 4, 5, 6, 7};
  // The tail 5 6 7 occurs at 1 and 6: the latest one (6) is followed by 3 4 5.
  CHECK(ngram_draft(t, 2, 4, 3) == std::vector<int32_t>{3, 4, 5});
  CHECK(ngram_draft(t, 2, 4, 10) == std::vector<int32_t>{3, 4, 5, 6, 7});  // up to the end
  CHECK(ngram_draft(t, 2, 4, 0).empty());
  // 4-gram "4 5 6 7" occurs nowhere earlier; "5 6 7" does: the longest match wins over a
  // later shorter one ("6 7" alone matches at 7 too, followed by the same 3).
  const std::vector<int32_t> u{1, 2, 5, 6, 7, 9, 9, 6, 7, 8, 5, 6, 7};
  CHECK(ngram_draft(u, 2, 4, 2) == std::vector<int32_t>{9, 9});
  CHECK(ngram_draft(u, 2, 2, 2) == std::vector<int32_t>{8, 5});
  // Nothing matches: no draft. A 1-gram only when asked for.
  const std::vector<int32_t> v{1, 2, 3, 4, 2};
  CHECK(ngram_draft(v, 2, 4, 3).empty());
  CHECK(ngram_draft(v, 1, 4, 3) == std::vector<int32_t>{3, 4, 2});
  CHECK(ngram_draft(std::vector<int32_t>{7}, 1, 4, 3).empty());
}

TEST_CASE("a sequence drafts more after full acceptance, less after a miss, and pauses while drafting loses") {
  const std::vector<int32_t> t{1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6};
  const Drafter ng = Drafter::Ngram;
  Speculator off(false);
  CHECK(off.draft(t, 7, 0).empty());
  CHECK(off.model_wanted(7, 0) == 0);
  Speculator s(true);
  CHECK(s.draft(t, 7, 0).size() == 4);  // k starts at 4
  CHECK(s.draft(t, 2, 0).size() == 2);  // never more than the room
  s.verified(ng, 4, 4, 10);
  CHECK(s.guard(ng).k() == 7);  // doubled, at most kMaxDraft
  s.verified(ng, 7, 2, 20);
  CHECK(s.guard(ng).k() == 3);  // accepted + 1
  CHECK(s.drafted_total() == 11);
  CHECK(s.accepted_total() == 6);
  // Drafts wholly rejected: longer matches are asked for, and once the recent acceptance is
  // under kRowCost drafting pauses (16 tokens, then 32).
  int32_t generated = 20;
  while (s.guard(ng).paused_until() == 0) s.verified(ng, s.guard(ng).k(), 0, ++generated);
  CHECK(s.n_min() == Speculator::kMaxMatch);
  CHECK(s.guard(ng).paused_until() == generated + 16);
  CHECK(s.draft(t, 7, generated + 15).empty());
  const std::vector<int32_t> w{1, 5, 6, 7, 8, 9, 5, 6, 7, 8};
  // The pause ends with the answer's 16th token after it, with k = 1.
  CHECK(s.draft(w, 7, generated + 16) == std::vector<int32_t>{9});
  const int32_t resumed = generated + 16;
  generated = resumed;
  while (s.guard(ng).paused_until() <= resumed) s.verified(ng, 1, 0, ++generated);
  CHECK(s.guard(ng).paused_until() == generated + 32);
}

TEST_CASE("drafting pays when its kept tokens cover the rows and the drafter's own passes") {
  // 8 drafts at kRowCost 0.25 cost 2 passes: 2 kept pay, 1 does not.
  CHECK(drafting_pays(2, 8, 0));
  CHECK_FALSE(drafting_pays(1.9, 8, 0));
  // A draft model whose 8 passes cost 0.5 of a target pass each (4 passes) needs 6 kept.
  CHECK(drafting_pays(6, 8, 8 * 0.5));
  CHECK_FALSE(drafting_pays(5.9, 8, 8 * 0.5));
  // Drafting for itself (ratio 1): even every draft kept is a loss.
  CHECK_FALSE(drafting_pays(8, 8, 8 * 1.0));
}

TEST_CASE("each drafter's k and pause move only with its own verifications") {
  const std::vector<int32_t> t{1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6};
  Speculator s(true);
  // A run of fully accepted draft-model guesses makes the draft model bolder, not the lookup.
  for (int32_t g = 1; g <= 6; ++g) s.verified(Drafter::Model, s.model_wanted(7, g), s.model_wanted(7, g), 8 * g);
  CHECK(s.guard(Drafter::Model).k() == Speculator::kMaxDraft);
  CHECK(s.guard(Drafter::Ngram).k() == 4);
  CHECK(s.draft(t, 7, 48).size() == 4);
  CHECK(s.n_min() == Speculator::kMinMatch);
  // The n-gram drafter losing pauses it alone.
  int32_t generated = 48;
  while (s.guard(Drafter::Ngram).paused_until() == 0) s.verified(Drafter::Ngram, 4, 0, ++generated);
  CHECK(s.draft(t, 7, generated).empty());
  CHECK(s.model_wanted(7, generated) == Speculator::kMaxDraft);
  // And the draft model losing pauses it alone: the lookup resumes after its own pause.
  Speculator u(true);
  generated = 0;
  while (u.guard(Drafter::Model).paused_until() == 0) u.verified(Drafter::Model, 2, 0, ++generated);
  CHECK(u.model_wanted(7, generated) == 0);
  CHECK(u.draft(t, 7, generated).size() == 4);
  CHECK(u.guard(Drafter::Ngram).drafted_total() == 0);
  CHECK(u.guard(Drafter::Model).drafted_total() == 2 * Speculator::kJudgeAfter);
}

TEST_CASE("a draft model whose passes cost more than its kept guesses save is switched off, one that wins stays on") {
  // The same acceptance (5 of 7 kept) at two cost ratios: at 0.1 a proposal costs
  // 7 * 0.25 + 7 * 0.1 = 2.45 passes and saves 5; at 0.8 it costs 7.35 and saves 5.
  auto run = [](double ratio) {
    Speculator s(true);
    for (int32_t g = 1; g <= 40; ++g) {
      const int32_t k = s.model_wanted(7, g * 6);
      if (k == 0) continue;
      s.verified(Drafter::Model, k, std::min(k, 5), g * 6, ratio * k);
    }
    return s;
  };
  const Speculator cheap = run(0.1), dear = run(0.8);
  CHECK(cheap.guard(Drafter::Model).paused_until() == 0);
  CHECK_FALSE(cheap.guard(Drafter::Model).off());
  // At 0.8 even 7 of 7 kept (cost 7.35) would lose: off after its first kJudgeAfter.
  CHECK(dear.guard(Drafter::Model).off());
  CHECK(dear.model_wanted(7, 1000) == 0);
  CHECK(dear.guard(Drafter::Model).drafted_total() < cheap.guard(Drafter::Model).drafted_total());
  // At 0.3, 1 of 7 kept loses (cost 3.85) but all kept would win: paused, not off.
  Speculator poor(true);
  int32_t g = 0;
  while (poor.guard(Drafter::Model).paused_until() == 0) poor.verified(Drafter::Model, 7, 1, ++g, 0.3 * 7);
  CHECK_FALSE(poor.guard(Drafter::Model).off());
  CHECK(poor.model_wanted(7, poor.guard(Drafter::Model).paused_until()) == 1);
  // Proposals with no guess (the draft model unsure) still cost its passes: a run of them
  // pauses it, and the n-gram drafter is untouched.
  Speculator unsure(true);
  int32_t generated = 0;
  while (unsure.guard(Drafter::Model).paused_until() == 0) unsure.verified(Drafter::Model, 0, 0, ++generated, 0.3);
  CHECK(unsure.model_wanted(7, generated) == 0);
  CHECK(unsure.guard(Drafter::Model).off());
  CHECK(unsure.guard(Drafter::Ngram).paused_until() == 0);
}

TEST_CASE("the draft model's cost ratio is measured against a one-row target pass") {
  DraftCostMeter m;
  CHECK(m.ratio() == 0);
  m.draft_passes(4, 8);   // 2 ms a pass
  CHECK(m.ratio() == 0);  // no target step seen yet
  m.target_step(1, 10);   // 10 ms for one row
  CHECK(m.ratio() == Approx(0.2));
  DraftCostMeter r;
  r.target_step(5, 20);  // 5 rows count as 1 + 4 * 0.25 = 2 one-row passes: 10 ms each
  r.draft_passes(1, 5);
  CHECK(r.ratio() == Approx(0.5));
}

TEST_CASE("drafts take only blocks the table has or the pool holds unused, and rollback returns them") {
  BlockPool pool(4, 16);
  BlockTable t;
  REQUIRE(t.reserve(pool, 10));
  // Pending token at 9: 6 positions left in the block, then 3 unused blocks (capped at 7).
  CHECK(draft_room(t, pool, 9) == Speculator::kMaxDraft);
  BlockTable other;
  REQUIRE(other.reserve(pool, 48));  // takes the 3 others
  CHECK(draft_room(t, pool, 9) == 6);
  CHECK(draft_room(t, pool, 15) == 0);  // the pending token fills the block; no block is unused
  other.release(pool);
  REQUIRE(t.reserve(pool, 40));  // drafts up to position 39: 3 blocks
  CHECK(pool.n_used() == 3);
  drop_unverified(t, pool, 17);  // 17 tokens hold: 2 blocks
  CHECK(pool.n_used() == 2);
  CHECK(t.capacity() == 32);
}

TEST_CASE("greedy answers with drafts are the answers without them: ids, logprob bits, alone and beside others") {
  for (const char* arch : {"llama", "gemma3"}) {
    INFO(arch);
    Fixture f(arch);
    std::vector<GenerationRequest> reqs{request(repetitive(1), 48), request(random_prompt(40, 2), 48),
                                        request(prompt_of(*f.tok, 3, 12), 40), request(repetitive(4), 33)};
    auto off = scheduler(f, Spec::Off);
    auto on = scheduler(f, Spec::Ngram);
    std::vector<Answer> expected;
    for (const GenerationRequest& r : reqs) expected.push_back(run(*off, r));
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("alone, request " << i);
      CHECK(run(*on, reqs[i]) == expected[i]);
    }
    const std::vector<Answer> together = run_all(*on, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("together, request " << i);
      CHECK(together[i] == expected[i]);
    }
    const SchedulerStats st = on->stats();
    CHECK(st.accepted_tokens_total > 0);
    CHECK(st.accepted_tokens_total <= st.draft_tokens_total);
    CHECK(off->stats().draft_tokens_total == 0);
    CHECK(st.generated_tokens_total == off->stats().generated_tokens_total * 2);
    // The answer's timings report its own drafts; a request may opt out.
    GenerationRequest opted = reqs[0];
    opted.speculative = false;
    const Answer without = run(*on, opted);
    CHECK(without == expected[0]);
    CHECK(without.timings.draft_tokens == 0);
    const Answer with = run(*on, reqs[0]);
    CHECK(with.timings.accepted_tokens > 0);
    CHECK(with.timings.accepted_tokens <= with.timings.draft_tokens);
  }
}

TEST_CASE("a seeded sampled answer with drafts is the answer without them") {
  Fixture f("llama");
  auto off = scheduler(f, Spec::Off);
  auto on = scheduler(f, Spec::Ngram);
  for (uint64_t seed : {7u, 8u, 9u}) {
    GenerationRequest r = request(repetitive(static_cast<uint32_t>(seed)), 48);
    r.sampling.temperature = 0.7f;
    r.sampling.seed = seed;
    r.sampling.repetition_penalty = 1.05f;  // the penalties see the same tokens in the same order
    INFO("seed " << seed);
    CHECK(run(*on, r) == run(*off, r));
  }
  CHECK(on->stats().draft_tokens_total > 0);
}

TEST_CASE("drafts leave the block pool and the prompt cache, in memory and on disk, as a run without them") {
  Fixture f("gemma3");  // sliding-window companions too
  TempDir dir_off, dir_on;
  auto make = [&](Spec spec, const TempDir& dir) {
    SchedulerOptions so = options("fp-spec");
    so.speculative = spec;
    return with_store(*f.model, *f.backend, *f.tok, so, dir.path());
  };
  auto off = make(Spec::Off, dir_off);
  auto on = make(Spec::Ngram, dir_on);
  // Turn 1, then turn 2 = turn 1's prompt and answer and more: a prompt-cache hit over the
  // answer's blocks, which the drafting run named from verified tokens only.
  const GenerationRequest first = request(repetitive(21), 64);
  const Answer a_off = run(*off, first), a_on = run(*on, first);
  REQUIRE(a_on == a_off);
  CHECK(a_on.timings.accepted_tokens > 0);
  GenerationRequest second = first;
  second.prompt.insert(second.prompt.end(), a_on.ids.begin(), a_on.ids.end());
  for (int32_t t : random_prompt(9, 22)) second.prompt.push_back(t + 1);
  second.max_tokens = 40;
  const Answer b_off = run(*off, second), b_on = run(*on, second);
  CHECK(b_on == b_off);
  CHECK(b_on.usage.cached_tokens == b_off.usage.cached_tokens);
  CHECK(b_on.usage.cached_tokens >= static_cast<int32_t>(first.prompt.size()));
  CHECK(eventually([&] { return on->stats().running == 0 && off->stats().running == 0; }));
  const SchedulerStats s_off = off->stats(), s_on = on->stats();
  CHECK(s_on.kv_blocks_used == 0);
  CHECK(s_on.kv_blocks_cached == s_off.kv_blocks_cached);
  off->close_cache(std::chrono::seconds(30));
  on->close_cache(std::chrono::seconds(30));
  const CacheStats c_off = off->cache_stats(), c_on = on->cache_stats();
  CHECK(c_on.memory_blocks == c_off.memory_blocks);
  CHECK(c_on.memory_tokens == c_off.memory_tokens);
  CHECK(c_on.memory_hit_tokens == c_off.memory_hit_tokens);
  CHECK(c_on.disk.entries == c_off.disk.entries);
  CHECK(c_on.disk.bytes == c_off.disk.bytes);
}

TEST_CASE("cancelling a request in the middle of a verification frees all its blocks") {
  Fixture f("gemma3");
  auto sched = scheduler(f, Spec::Ngram, 2);
  GenerationRequest r = request(repetitive(31), -1);
  r.max_tokens = 400;  // greedy: this prompt's answer loops without an end-of-generation token
  Collector c;
  cancel_while_held(*sched, r, c, [] {});
  CHECK(c.end.finish_reason == "cancelled");
  CHECK(eventually([&] { return sched->stats().running == 0; }));
  CHECK(sched->stats().kv_blocks_used == 0);
  CHECK(sched->stats().draft_tokens_total > 0);
}

TEST_CASE("on Gemma 3 270M, an answer that copies its prompt keeps drafts and is the answer without them") {
  std::optional<LoadedModel> gemma = load_test_model();
  if (!gemma) return;
  auto& [file, backend, model, tok] = *gemma;
  const std::string text =
      "def area(width, height):\n    return width * height\n\n"
      "def perimeter(width, height):\n    return 2 * (width + height)\n\n";
  std::vector<GenerationRequest> reqs{request(tok->encode("<start_of_turn>user\nCopy this code exactly:\n" + text +
                                                              "<end_of_turn>\n<start_of_turn>model\n",
                                                          true, true),
                                              48),
                                      request(tok->encode("The capital of France is", true, false), 12)};
  auto make = [&](Spec spec) {
    SchedulerOptions so = options();
    so.speculative = spec;
    return std::move(*Scheduler::create(*model, *backend, *tok, so));
  };
  auto off = make(Spec::Off), on = make(Spec::Ngram);
  const Answer expected = run(*off, reqs[0]);
  const Answer alone = run(*on, reqs[0]);
  CHECK(alone == expected);
  CHECK(alone.timings.accepted_tokens > 10);
  // Beside a request whose answer is free text (few drafts, if any).
  CHECK(run_all(*on, reqs)[0] == expected);
}

TEST_CASE("a grammar-constrained answer with drafts is the answer without them") {
  Fixture f("llama");
  std::shared_ptr<GrammarCompiler> compiler = grammar_compiler_for(*f.tok);
  Result<std::shared_ptr<const CompiledGrammar>> g =
      compiler->json_schema(R"({"type":"array","items":{"enum":["abc 1","the 2","xyz 3"]},"maxItems":12})");
  REQUIRE(g.ok());
  auto off = scheduler(f, Spec::Off);
  auto on = scheduler(f, Spec::Ngram);
  for (uint32_t seed : {41u, 42u}) {
    GenerationRequest r = request(repetitive(seed), 64);
    r.grammar = *g;
    INFO("seed " << seed);
    const Answer expected = run(*off, r);
    CHECK(expected.text.rfind("[", 0) == 0);  // the grammar holds
    CHECK(run(*on, r) == expected);
  }
  CHECK(on->stats().draft_tokens_total > 0);
}
