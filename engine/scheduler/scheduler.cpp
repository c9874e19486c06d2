#include "engine/scheduler/scheduler.h"

#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "engine/kv/block_pool.h"
#include "engine/model/context.h"
#include "engine/scheduler/sequence.h"

namespace hearth {

void Histogram::observe(double v) {
  for (size_t i = 0; i < kBoundsMs.size(); ++i)
    if (v <= kBoundsMs[i]) ++counts[i];
  ++count;
  sum += v;
}

namespace {

struct Queued {
  GenerationRequest request;
  std::shared_ptr<RequestHandle> handle;
  Clock::time_point submitted;
};

}  // namespace

class Scheduler::Impl {
 public:
  Impl(const Model& model, Backend& backend, const Tokenizer& tokenizer, const SchedulerOptions& o)
      : model_(model), backend_(backend), tokenizer_(tokenizer), options_(o),
        pool_(o.n_parallel * ((o.n_ctx + o.block_tokens - 1) / o.block_tokens), o.block_tokens) {}

  ~Impl() {
    stop_accepting();
    cancel_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Status init() {
    // One step carries at most one decode token per running sequence plus the prefill
    // budget; with no budget (prefill_chunk 0) a whole prompt fits.
    const int64_t prefill = options_.prefill_chunk > 0 ? options_.prefill_chunk : options_.n_ctx;
    n_batch_ = options_.n_parallel + prefill;
    Result<ForwardBuffers> fb =
        allocate_forward_buffers(model_.config(), backend_, static_cast<int64_t>(pool_.n_total()) * pool_.block_tokens(),
                                 n_batch_, options_.n_parallel, options_.kv_type);
    if (!fb) return fb.error();
    buffers_ = std::move(*fb);
    publish_gauges();
    thread_ = std::thread([this] { run(); });
    return {};
  }

  Submitted submit(GenerationRequest request, std::function<void()> on_event) {
    Submitted out;
    const int32_t n_vocab = model_.config().n_vocab;
    if (request.prompt.empty()) return invalid("the prompt is empty");
    if (static_cast<int64_t>(request.prompt.size()) >= options_.n_ctx)
      return invalid("the prompt has " + std::to_string(request.prompt.size()) + " tokens; the context holds " +
                     std::to_string(options_.n_ctx) + " (prompt and answer together)");
    for (int32_t t : request.prompt)
      if (t < 0 || t >= n_vocab) return invalid("token id " + std::to_string(t) + " is outside the vocabulary");
    if (Status s = request.sampling.validate(); !s) return invalid(s.error().message);

    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) return {SubmitStatus::ShuttingDown, "the daemon is shutting down", nullptr};
    const int64_t free_running = options_.n_parallel - n_running_;
    if (static_cast<int64_t>(queue_.size()) >= options_.queue_max + std::max<int64_t>(free_running, 0))
      return {SubmitStatus::QueueFull, "too many requests are waiting; try again later", nullptr};
    out.handle = std::make_shared<RequestHandle>(std::move(on_event));
    queue_.push_back(Queued{std::move(request), out.handle, Clock::now()});
    stats_.queue_depth = static_cast<int64_t>(queue_.size());
    wake_.notify_one();
    return out;
  }

  void stop_accepting() {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
  }

  void cancel_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Queued& q : queue_) q.handle->cancel();
    for (const std::shared_ptr<RequestHandle>& h : running_handles_) h->cancel();
    wake_.notify_all();
  }

  int64_t in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(queue_.size()) + n_running_;
  }

  SchedulerStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  const SchedulerOptions& options() const { return options_; }

 private:
  static Submitted invalid(std::string message) { return {SubmitStatus::Invalid, std::move(message), nullptr}; }

  // The step loop (engine thread).
  void run() {
    std::vector<Queued> admitted, dropped;
    for (;;) {
      admitted.clear();
      dropped.clear();
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          return quit_ || !running_.empty() || (!queue_.empty() && n_running_ < options_.n_parallel) ||
                 any_queued_cancelled();
        });
        if (quit_ && queue_.empty() && running_.empty()) return;
        // Requests cancelled while queued end here, without taking a sequence.
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->handle->cancelled()) {
            dropped.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
        while (!queue_.empty() && n_running_ < options_.n_parallel) {
          admitted.push_back(std::move(queue_.front()));
          queue_.pop_front();
          running_handles_.push_back(admitted.back().handle);
          ++n_running_;
          stats_.prompt_tokens_total += admitted.back().request.prompt.size();
        }
        stats_.queue_depth = static_cast<int64_t>(queue_.size());
        stats_.cancelled_total += dropped.size();
      }
      const Clock::time_point now = Clock::now();
      for (Queued& q : dropped) {
        Sequence seq(std::move(q.request), q.handle, tokenizer_, options_.n_ctx, q.submitted);
        seq.finish("cancelled", now);
      }
      for (Queued& q : admitted) {
        running_.push_back(std::make_unique<Sequence>(std::move(q.request), q.handle, tokenizer_, options_.n_ctx,
                                                      q.submitted));
        running_.back()->on_admitted(now);
      }
      drop_cancelled();
      if (!running_.empty()) step();
      publish_gauges();
    }
  }

  bool any_queued_cancelled() const {
    for (const Queued& q : queue_)
      if (q.handle->cancelled()) return true;
    return false;
  }
  void drop_cancelled() {
    const Clock::time_point now = Clock::now();
    for (auto it = running_.begin(); it != running_.end();) {
      if ((*it)->handle().cancelled()) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++stats_.cancelled_total;
        }
        it = retire(it, "cancelled", now);
      } else {
        ++it;
      }
    }
  }

  using SeqList = std::list<std::unique_ptr<Sequence>>;

  // Frees a finished sequence's blocks, then ends its stream (finish_reason, or nullptr
  // when a Failed event was already sent) and forgets it. The gauges are updated before
  // the last event goes out, so a client that saw it also sees the memory returned.
  SeqList::iterator retire(SeqList::iterator it, const char* finish_reason, Clock::time_point now) {
    Sequence& s = **it;
    s.table().release(pool_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      RequestHandle* h = &s.handle();
      std::erase_if(running_handles_, [h](const std::shared_ptr<RequestHandle>& p) { return p.get() == h; });
      --n_running_;
      stats_.running = n_running_;
      stats_.kv_blocks_used = pool_.n_used();
    }
    if (finish_reason) s.finish(finish_reason, now);
    return running_.erase(it);
  }

  // One forward pass: every decoding sequence's pending token, then prompt chunks in
  // admission order within the prefill budget.
  void step() {
    struct Planned {
      SeqList::iterator seq;
      int32_t n;         // tokens run this step
      bool wants_logits; // the chunk ends at the sequence's last known token
    };
    std::vector<Planned> plan;
    int64_t rows = 0;
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if (!(*it)->prefilling()) plan.push_back({it, 1, true}), rows += 1;
    int64_t budget = n_batch_ - rows;
    if (options_.prefill_chunk > 0) budget = std::min<int64_t>(budget, options_.prefill_chunk);
    for (auto it = running_.begin(); it != running_.end() && budget > 0; ++it) {
      Sequence& s = **it;
      if (!s.prefilling()) continue;
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(s.n_pending(), budget));
      plan.push_back({it, n, n == s.n_pending()});
      budget -= n;
      rows += n;
    }
    if (plan.empty()) return;

    const Clock::time_point start = Clock::now();
    ForwardBatch batch;
    int64_t row = 0;
    for (Planned& p : plan) {
      Sequence& s = **p.seq;
      const int32_t first = s.n_computed();
      // The pool holds n_ctx tokens for every running sequence, so this cannot fail.
      const bool ok = s.table().reserve(pool_, first + p.n);
      (void)ok;
      if (s.prefilling()) s.on_prefill_chunk(start);
      batch.seqs.push_back(SeqChunk{std::span<const int32_t>(s.tokens()).subspan(static_cast<size_t>(first),
                                                                                 static_cast<size_t>(p.n)),
                                    first, s.table().slots()});
      row += p.n;
      if (p.wants_logits) batch.logit_rows.push_back(static_cast<int32_t>(row - 1));
    }

    graph_.clear();
    model_.build_forward(graph_, batch, buffers_.act, buffers_.kv);
    Status st = backend_.execute(graph_);
    const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
    if (st && !batch.logit_rows.empty()) {
      logits_.resize(batch.logit_rows.size() * n_vocab);
      backend_.read(*buffers_.act.logits.buffer, buffers_.act.logits.offset, logits_.data(),
                    logits_.size() * sizeof(float));
    }
    const Clock::time_point end = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.steps_total;
    }
    if (!st) {
      LOG_ERROR("engine: forward pass failed: " + st.error().message);
      for (Planned& p : plan) {
        RequestEvent ev;
        ev.kind = RequestEvent::Kind::Failed;
        ev.error = "the forward pass failed: " + st.error().message;
        (*p.seq)->handle().push(std::move(ev));
        retire(p.seq, nullptr, end);
      }
      return;
    }

    size_t logit_row = 0;
    for (Planned& p : plan) {
      Sequence& s = **p.seq;
      s.on_computed(p.n, end);
      if (!p.wants_logits) continue;
      const size_t n_itl_before = s.itl_ms().size();
      const char* finished = s.on_logits(logits_.data() + logit_row++ * n_vocab, static_cast<int32_t>(n_vocab), end);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.generated_tokens_total;
        if (s.n_generated() == 1) stats_.ttft_ms.observe(s.ttft_ms());
        for (size_t i = n_itl_before; i < s.itl_ms().size(); ++i) stats_.itl_ms.observe(s.itl_ms()[i]);
      }
      if (finished) retire(p.seq, finished, end);
    }
  }

  void publish_gauges() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.running = n_running_;
    stats_.kv_blocks_used = pool_.n_used();
    stats_.kv_blocks_total = pool_.n_total();
  }

  const Model& model_;
  Backend& backend_;
  const Tokenizer& tokenizer_;
  const SchedulerOptions options_;

  // Engine thread only.
  BlockPool pool_;
  ForwardBuffers buffers_;
  int64_t n_batch_ = 0;
  Graph graph_;
  std::vector<float> logits_;
  SeqList running_;
  std::thread thread_;

  // Shared, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::vector<std::shared_ptr<RequestHandle>> running_handles_;  // for cancel_all
  int64_t n_running_ = 0;
  bool accepting_ = true;
  bool quit_ = false;
  SchedulerStats stats_;
};

Result<std::unique_ptr<Scheduler>> Scheduler::create(const Model& model, Backend& backend, const Tokenizer& tokenizer,
                                                     const SchedulerOptions& o) {
  if (o.n_parallel < 1 || o.n_parallel > 256) return make_error("scheduler: parallel must be in [1, 256]");
  if (o.n_ctx < 2) return make_error("scheduler: the context must hold at least 2 tokens");
  if (o.prefill_chunk < 0) return make_error("scheduler: prefill chunk must be >= 0");
  if (o.queue_max < 0) return make_error("scheduler: queue length must be >= 0");
  if (o.block_tokens < 1) return make_error("scheduler: block size must be positive");
  if (o.kv_type != DType::F16 && o.kv_type != DType::F32) return make_error("scheduler: KV type must be f16 or f32");
  auto impl = std::make_unique<Impl>(model, backend, tokenizer, o);
  if (Status s = impl->init(); !s) return s.error();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;
Submitted Scheduler::submit(GenerationRequest request, std::function<void()> on_event) {
  return impl_->submit(std::move(request), std::move(on_event));
}
void Scheduler::stop_accepting() { impl_->stop_accepting(); }
void Scheduler::cancel_all() { impl_->cancel_all(); }
int64_t Scheduler::in_flight() const { return impl_->in_flight(); }
SchedulerStats Scheduler::stats() const { return impl_->stats(); }
CacheStats Scheduler::cache_stats() const { return {}; }  // TODO(issue 4): filled in by the engine
Status Scheduler::clear_cache(bool) { return {}; }
const SchedulerOptions& Scheduler::options() const { return impl_->options(); }

}  // namespace hearth
