// hearth-run --draft-model: speculative decoding without a daemon. The prompt runs through
// an in-process Scheduler (one sequence), the engine hearthd runs, with the n-gram lookup
// and the draft model drafting and the target verifying (engine/scheduler/speculation.h);
// the answer is the one hearth-run gives without the flag, only the number of forward
// passes changes, and the drafts verified and kept are printed with the timings.
// --bench with it times greedy decoding through that scheduler with speculation off and on.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/model/model_path.h"
#include "run.h"

namespace hearth {

Result<std::unique_ptr<LoadedDraft>> load_draft(const Loaded& target, const std::string& target_path,
                                                const std::string& arg) {
  auto d = std::make_unique<LoadedDraft>();
  Result<std::string> path = resolve_model(arg);
  if (!path) return make_error("--draft-model: " + path.error().message);
  d->path = *path;
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(d->path);
  if (!file) return make_error("--draft-model " + d->path + ": " + file.error().message);
  d->file = std::move(*file);
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*d->file);
  if (!tok) return make_error("--draft-model " + d->path + ": " + tok.error().message);
  d->tokenizer = std::move(*tok);
  // Checked before the weights load, with the files' names (general.name can be obscure).
  if (Status fit = check_same_vocab(*target.tokenizer, target_path, *d->tokenizer, d->path); !fit)
    return make_error("--draft-model: " + fit.error().message);
  Result<std::unique_ptr<Model>> model = Model::load(d->file, *target.backend);
  if (!model) return make_error("--draft-model " + d->path + ": " + model.error().message);
  d->model = std::move(*model);
  Result<std::shared_ptr<DraftModel>> bound =
      DraftModel::create(*target.model, *target.tokenizer, *d->model, *d->tokenizer, *target.backend);
  if (!bound) return bound.error();
  d->bound = std::move(*bound);
  return d;
}

Result<std::unique_ptr<Scheduler>> one_sequence_scheduler(const Loaded& l, int32_t n_ctx, DType kv_type,
                                                          std::shared_ptr<const DraftModel> draft) {
  SchedulerOptions so;
  so.n_parallel = 1;
  so.n_ctx = n_ctx;
  so.kv_type = kv_type;
  so.prefix_cache = false;  // each run reads its prompt, as hearth-run without the flag does
  so.speculative = draft ? SchedulerOptions::Speculative::Ngram : SchedulerOptions::Speculative::Off;
  so.draft_model = std::move(draft);
  return Scheduler::create(*l.model, *l.backend, *l.tokenizer, so);
}

Result<RequestEvent> run_request(Scheduler& s, GenerationRequest r, const EventCallback& on_text) {
  // Shared with the engine thread's callback, which may still run after the Finished event
  // is taken here.
  struct Wake {
    std::mutex m;
    std::condition_variable cv;
    bool ready = false;
  };
  auto wake = std::make_shared<Wake>();
  Submitted sub = s.submit(std::move(r), [wake] {
    std::lock_guard<std::mutex> lock(wake->m);
    wake->ready = true;
    wake->cv.notify_one();
  });
  if (sub.status != SubmitStatus::Accepted) return make_error(sub.message);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(wake->m);
      wake->cv.wait(lock, [&] { return wake->ready; });
      wake->ready = false;
    }
    for (RequestEvent& ev : sub.handle->take_events()) {
      if (ev.kind == RequestEvent::Kind::Failed) return make_error(ev.error);
      if (ev.kind == RequestEvent::Kind::Finished) return std::move(ev);
      if (on_text && !on_text(ev)) sub.handle->cancel();
    }
  }
}

namespace {

// Decode tok/s of a greedy answer of o.tg tokens to a random prompt of 32 tokens, mean of
// o.reps runs after a warm-up; the drafts verified and kept over those runs.
struct DecodeRun {
  double tok_s = 0;
  int64_t drafted = 0, accepted = 0;
};
Result<DecodeRun> time_decode(Scheduler& s, const Loaded& l, const BenchOptions& o) {
  std::mt19937 rng(42);
  // Ordinary tokens, away from the control ids at either end (a small vocabulary too).
  const int32_t n_vocab = l.model->config().n_vocab, edge = std::min(1000, n_vocab / 4);
  std::uniform_int_distribution<int32_t> pick(edge, n_vocab - 1 - edge);
  GenerationRequest r;
  if (l.tokenizer->add_bos()) r.prompt.push_back(l.tokenizer->bos_id());
  while (r.prompt.size() < 32) r.prompt.push_back(pick(rng));
  r.max_tokens = o.tg;
  r.sampling.temperature = 0;
  DecodeRun out;
  for (int rep = 0; rep <= o.reps; ++rep) {
    Result<RequestEvent> ev = run_request(s, r, {});
    if (!ev) return ev.error();
    if (rep == 0) continue;  // warm-up: pages in the weights of both models
    out.tok_s += ev->timings.decode_tok_s / o.reps;
    out.drafted += ev->timings.draft_tokens;
    out.accepted += ev->timings.accepted_tokens;
  }
  return out;
}

}  // namespace

int bench_drafts(const Loaded& l, const LoadedDraft& d, const BenchOptions& o) {
  if (o.tg <= 0) return 0;
  const int32_t n_ctx = 32 + o.tg + 1;
  Result<std::unique_ptr<Scheduler>> off = one_sequence_scheduler(l, n_ctx, o.kv_type, nullptr);
  Result<std::unique_ptr<Scheduler>> on = one_sequence_scheduler(l, n_ctx, o.kv_type, d.bound);
  if (!off || !on) return std::fprintf(stderr, "hearth-run: %s\n", (!off ? off : on).error().message.c_str()), 1;
  Result<DecodeRun> a = time_decode(**off, l, o);
  Result<DecodeRun> b = a ? time_decode(**on, l, o) : a;
  if (!b) return std::fprintf(stderr, "hearth-run: %s\n", b.error().message.c_str()), 1;
  const std::string test = "tg" + std::to_string(o.tg);
  if (o.json) {
    std::cout << nlohmann::json{{"test", test},
                                {"draft_model", d.path},
                                {"tok_s_without_drafts", a->tok_s},
                                {"tok_s_with_drafts", b->tok_s},
                                {"draft_tokens", b->drafted},
                                {"accepted_tokens", b->accepted},
                                {"reps", o.reps}}
                     .dump()
              << std::endl;
    return 0;
  }
  std::printf("\nspeculative decoding, greedy, one sequence through the scheduler, draft model %s:\n", d.path.c_str());
  std::printf("| test | drafts | t/s | drafted | kept |\n| --- | --- | ---: | ---: | ---: |\n");
  std::printf("| %s | off | %.2f | 0 | 0 |\n", test.c_str(), a->tok_s);
  std::printf("| %s | on | %.2f | %lld | %lld |\n", test.c_str(), b->tok_s, static_cast<long long>(b->drafted),
              static_cast<long long>(b->accepted));
  return 0;
}

}  // namespace hearth
