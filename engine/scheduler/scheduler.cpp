#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "common/thread_name.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_hash.h"
#include "engine/model/context.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/kv_store.h"
#include "engine/scheduler/metrics.h"
#include "engine/scheduler/prefix_cache.h"
#include "engine/scheduler/sequence.h"
#include "storage/chunk_file.h"

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

// Companions for the sliding-window layers' KV (engine/kv/block_pool.h), 0 when the model
// has no sliding-window layer. A sequence whose step reads n tokens from position P holds
// the blocks of [P - window + 1, P + n): at most (window + n) / bt + 2; the steps' tokens,
// all sequences together, are at most n_batch. Another window per sequence keeps a finished
// prompt's end in memory for the next request that continues it. Never more than the pool
// has blocks: then nothing is saved, but nothing changes either.
int32_t sliding_blocks(const ModelConfig& c, const SchedulerOptions& o, int32_t n_blocks) {
  if (c.n_sliding_layers() == 0) return 0;
  const int64_t bt = o.block_tokens;
  const int64_t prefill = o.prefill_chunk > 0 ? o.prefill_chunk : o.n_ctx;
  const int64_t window_blocks = (c.sliding_window + bt - 1) / bt;
  const int64_t n = int64_t{o.n_parallel} * (2 * window_blocks + 4) + (o.n_parallel + prefill + bt - 1) / bt;
  return static_cast<int32_t>(std::min<int64_t>(n, n_blocks));
}

int32_t pool_blocks(const SchedulerOptions& o) {
  return o.n_parallel * ((o.n_ctx + o.block_tokens - 1) / o.block_tokens);
}

}  // namespace

// While other sequences can step, one engine loop spends at most this long copying a
// restore's chunks into KV blocks (the rest goes on after their step). Measured on the
// default model, 2 threads, a 4,000-token disk hit beside a stream whose steps take
// 11-13 ms: slices of 3 / 12 / 30 ms gave the stream's largest gap 24-25 / 25-27 / 34-43 ms
// and the hit's TTFT 115-132 / 81-95 / 75-80 ms (reading all on the engine thread: 49-62
// ms and 55-66 ms).
constexpr int64_t kRestoreSliceUs = 12000;

class Scheduler::Impl {
 public:
  Impl(const Model& model, Backend& backend, const Tokenizer& tokenizer, const SchedulerOptions& o,
       std::unique_ptr<storage::ChunkStore> store)
      : model_(model),
        backend_(backend),
        tokenizer_(tokenizer),
        options_(o),
        clock_(o.clock ? o.clock : steady_step_clock()),
        work_(token_work(model.file())),
        store_(std::move(store)),
        pool_(pool_blocks(o), o.block_tokens, sliding_blocks(model.config(), o, pool_blocks(o))) {}

  ~Impl() {
    stop_accepting();
    cancel_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    cache_.reset();
    if (store_) store_->close(std::chrono::seconds(5));
  }

  Status init() {
    // One step carries at most one decode token per running sequence plus the prefill
    // budget; with no budget (prefill_chunk 0) a whole prompt fits.
    const int64_t prefill = options_.prefill_chunk > 0 ? options_.prefill_chunk : options_.n_ctx;
    n_batch_ = options_.n_parallel + prefill;
    // A step with drafts has up to kVerifyRows rows, each with logits (plan_drafts).
    const int64_t n_logits = std::max<int64_t>(
        options_.n_parallel, options_.speculative == SchedulerOptions::Speculative::Off ? 0 : verify_rows());
    Result<ForwardBuffers> fb = allocate_forward_buffers(
        model_.config(), backend_, static_cast<int64_t>(pool_.n_total()) * pool_.block_tokens(), n_batch_, n_logits,
        options_.kv_type, int64_t{pool_.n_sliding_total()} * pool_.block_tokens());
    if (!fb) return fb.error();
    buffers_ = std::move(*fb);
    open_cache();
    publish_gauges();
    thread_ = std::thread([this] {
      set_thread_name("hearth-engine");
      run();
    });
    return {};
  }

  Submitted submit(GenerationRequest request, std::function<void()> on_event) {
    Submitted out;
    const int32_t n_vocab = model_.config().n_vocab;
    if (auto problem = check_prompt(request.prompt, options_.n_ctx, n_vocab)) return invalid(problem->message);
    if (Status s = request.sampling.validate(); !s) return invalid(s.error().message);

    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) return {SubmitStatus::ShuttingDown, "the daemon is shutting down", nullptr};
    const int64_t free_running = options_.n_parallel - n_running_;
    if (static_cast<int64_t>(queue_.size()) >= options_.queue_max + std::max<int64_t>(free_running, 0))
      return {SubmitStatus::QueueFull, "too many requests are waiting; try again later", nullptr};
    out.handle = std::make_shared<RequestHandle>(std::move(on_event), [w = std::weak_ptr<Wakeup>(wakeup_)] {
      if (const std::shared_ptr<Wakeup> wakeup = w.lock()) {
        std::lock_guard<std::mutex> wake_lock(wakeup->mutex);
        wakeup->cv.notify_all();
      }
    });
    queue_.push_back(Queued{std::move(request), out.handle, clock_->now()});
    metrics_.queue_depth(static_cast<int64_t>(queue_.size()));
    wake_.notify_one();
    return out;
  }

  void stop_accepting() {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
  }

  void cancel_all() {
    std::vector<std::shared_ptr<RequestHandle>> handles;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Queued& q : queue_) handles.push_back(q.handle);
      handles.insert(handles.end(), running_handles_.begin(), running_handles_.end());
    }
    for (const std::shared_ptr<RequestHandle>& h : handles) h->cancel();  // each wakes the engine
  }

  int64_t in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(queue_.size()) + n_running_;
  }

  SchedulerStats stats() const { return metrics_.stats(); }

  const SchedulerOptions& options() const { return options_; }

  CacheStats cache_stats() const {
    CacheStats out = metrics_.cache();
    out.disk_enabled = store_ != nullptr;
    out.disk_dir = store_ ? store_->dir().string() : "";
    if (store_) out.disk = store_->stats();
    out.model_fingerprint = options_.model_fingerprint;
    out.kv_type = dtype_name(options_.kv_type);  // "F16": as --kv-type and llama.cpp's -ctk say it, "f16"
    std::transform(out.kv_type.begin(), out.kv_type.end(), out.kv_type.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    out.kv_bytes_per_token_memory = static_cast<uint64_t>(kv_token_bytes());
    if (store_) {
      // One chunk file (header, token ids, payload) over its tokens.
      storage::ChunkHeader chunk;
      chunk.n_tokens = static_cast<uint32_t>(kChunkBlocks * pool_.block_tokens());
      chunk.payload_bytes = store_->format().bytes_per_token() * chunk.n_tokens;
      out.kv_bytes_per_token_disk = static_cast<double>(chunk.file_bytes()) / chunk.n_tokens;
    }
    for (const auto& [uid, d] : out.disk.owners) {
      out.owners[uid].disk_entries = d.entries;
      out.owners[uid].disk_bytes = d.bytes;
    }
    return out;
  }

  // Runs fn on the engine thread between steps and waits for it; false (fn not run) once
  // the engine thread has stopped.
  bool run_on_engine(std::function<void()> fn) {
    std::packaged_task<void()> task(std::move(fn));
    std::future<void> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (engine_done_) return false;
      tasks_.push_back(std::move(task));
    }
    wake_.notify_all();
    done.wait();
    return true;
  }

  Status clear_cache(bool all_models, std::optional<uint32_t> owner) {
    Status st;
    const bool ran = run_on_engine([&] {
      const int32_t n = pool_.clear_cached(owner);
      LOG_INFO("prompt cache: cleared " + std::to_string(n) + " cached KV blocks from memory" +
               (owner ? " (uid " + std::to_string(*owner) + ")" : ""));
      if (store_) st = store_->clear(all_models, owner);
      publish_gauges();
    });
    if (!ran) return make_error("the engine has stopped");
    return st;
  }

  size_t close_cache(std::chrono::milliseconds timeout) { return store_ ? store_->close(timeout) : 0; }

 private:
  // The prompt cache: the hash chain's seed, the memory tier (the block pool itself) and
  // the disk tier when create() was given one. Without the prompt cache the store, if
  // any, is closed and unused.
  void open_cache() {
    if (!options_.prefix_cache) {
      store_.reset();
      return;
    }
    const ModelConfig& c = model_.config();
    const uint32_t dtype = static_cast<uint32_t>(options_.kv_type);
    // Without a fingerprint (no disk tier) the memory tier still needs a seed; it lives
    // only as long as this process, so the model's shape is enough.
    const std::string fp =
        options_.model_fingerprint.empty() ? "unfingerprinted:" + c.name : options_.model_fingerprint;
    const uint64_t seed = prefix_seed(fp, dtype, static_cast<uint32_t>(c.n_layer), static_cast<uint32_t>(c.kv_dim()),
                                      storage::kChunkFormatVersion, options_.numerics_version);
    // A restore's chunks are read on the cache's reader threads; the last one wakes the engine.
    cache_ = std::make_unique<PrefixCache>(pool_, backend_, buffers_.kv, c, seed, store_.get(), [this] {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        restore_read_ = true;
      }
      wake_.notify_all();
    });
  }

  // Puts the longest cached prefix of a new sequence's prompt into its block table. When
  // chunks are read from disk, the sequence waits (restoring()) and the engine steps the
  // others while they are read; advance_restores() places them as they arrive.
  void attach_cached(Sequence& s) {
    if (!cache_) return;
    SeqCacheState& st = s.cache();
    st.restore_started = clock_->now();
    const bool others = std::ranges::any_of(
        running_, [&](const std::unique_ptr<Sequence>& q) { return q.get() != &s && !restoring(*q); });
    s.on_cached(cache_->attach_prefix(s.tokens(), s.cacheable(), s.table(), st, others));
    if (!st.pending) cached(s);
  }
  void cached(Sequence& s) {
    SeqCacheState& st = s.cache();
    st.restore_ms = std::chrono::duration<double, std::milli>(clock_->now() - st.restore_started).count();
    metrics_.cache_lookup(st, store_ && s.n_computed() < s.cacheable());
  }
  static bool restoring(const Sequence& s) { return s.cache().pending != nullptr; }
  // Restores go on as their chunks arrive: into the block table, then prefill (or, for a
  // warm prompt now wholly cached, its end). While other sequences can step, copying
  // chunks stops after kRestoreSliceMs so their next token is not held up by much.
  void advance_restores() {
    const bool others =
        std::ranges::any_of(running_, [](const std::unique_ptr<Sequence>& s) { return !restoring(*s); });
    const auto deadline = others ? std::chrono::steady_clock::now() + std::chrono::microseconds(kRestoreSliceUs)
                                 : std::chrono::steady_clock::time_point::max();
    for (auto it = running_.begin(); it != running_.end();) {
      Sequence& s = **it;
      if (!restoring(s)) {
        ++it;
        continue;
      }
      std::optional<int32_t> n = cache_->advance_restore(s.tokens(), s.cacheable(), s.table(), s.cache(), deadline);
      if (!n) {
        ++it;
        continue;
      }
      s.on_cached(*n);
      cached(s);
      it = s.warm() && !s.prefilling() ? retire(it, "warmed", clock_->now()) : std::next(it);
    }
  }
  // Nothing to step until a restore's next chunk is read: every running sequence waits for
  // one, or for a block that a restoring sequence is about to have (waits_for_other). The
  // reader's wake-up after each chunk (restore_read_) ends the wait.
  bool only_restoring() const {
    bool any = false;
    for (const std::unique_ptr<Sequence>& s : running_) {
      if (restoring(*s)) {
        if (!s->cache().pending->waits_for_read) return false;  // chunks read and not yet placed
        any = true;
      } else if (!s->prefilling() || !waits_for_other(*s)) {
        return false;
      }
    }
    return any;
  }

  // Whether a sequence at a block boundary should wait: an earlier sequence is computing
  // the very block it needs next (same name), so it will attach it rather than compute it
  // twice — eight clients sending one system prompt prefill it once.
  bool waits_for_other(const Sequence& s) const {
    const int32_t bt = pool_.block_tokens();
    const int32_t n = s.n_computed();
    if (n % bt != 0) return false;
    const size_t i = static_cast<size_t>(n / bt);
    const std::vector<uint64_t>& h = s.cache().hashes;
    if (i >= h.size() || n + bt > s.cacheable()) return false;
    for (const std::unique_ptr<Sequence>& q : running_) {
      if (q.get() == &s) return false;  // only earlier sequences count
      Sequence& o = *q;
      if (o.prefilling() && o.cache().hashes.size() > i && o.cache().hashes[i] == h[i] &&
          o.n_computed() < static_cast<int32_t>(i + 1) * bt)
        return true;
    }
    return false;
  }

  static Submitted invalid(std::string message) { return {SubmitStatus::Invalid, std::move(message), nullptr}; }

  // The step loop (engine thread).
  void run() {
    std::vector<Queued> admitted, dropped;
    std::vector<std::packaged_task<void()>> tasks;
    for (;;) {
      admitted.clear();
      dropped.clear();
      tasks.clear();
      {
        const bool idle = only_restoring();  // engine thread's own state: read before the lock
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          return quit_ || (!running_.empty() && !idle) || restore_read_ ||
                 (!queue_.empty() && n_running_ < options_.n_parallel) || any_cancelled() || !tasks_.empty();
        });
        restore_read_ = false;
        tasks.swap(tasks_);
        if (quit_ && queue_.empty() && running_.empty()) {
          engine_done_ = true;  // run_on_engine() refuses from now on
          lock.unlock();
          for (std::packaged_task<void()>& t : tasks) t();
          return;
        }
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
          metrics_.admitted(admitted.back().request.prompt.size());
        }
        metrics_.queue_depth(static_cast<int64_t>(queue_.size()));
        metrics_.cancelled(dropped.size());
      }
      for (std::packaged_task<void()>& t : tasks) t();
      const Clock::time_point now = clock_->now();
      for (Queued& q : dropped) {
        Sequence seq(std::move(q.request), q.handle, tokenizer_, options_.n_ctx, q.submitted);
        seq.finish("cancelled", now);
      }
      for (Queued& q : admitted) {
        q.request.speculative &= options_.speculative != SchedulerOptions::Speculative::Off;
        running_.push_back(
            std::make_unique<Sequence>(std::move(q.request), q.handle, tokenizer_, options_.n_ctx, q.submitted, work_));
        running_.back()->on_admitted(now);
        attach_cached(*running_.back());
        if (running_.back()->warm() && !running_.back()->prefilling() && !restoring(*running_.back()))
          retire(std::prev(running_.end()), "warmed", clock_->now());
      }
      if (cache_) advance_restores();
      drop_cancelled();
      if (!running_.empty()) step();
      publish_gauges();
    }
  }

  // Under mutex_: a request cancelled while queued, or while running (the engine may sleep
  // with running sequences that all wait for a restore's reads).
  bool any_cancelled() const {
    return std::ranges::any_of(queue_, [](const Queued& q) { return q.handle->cancelled(); }) ||
           std::ranges::any_of(running_handles_, [](const auto& h) { return h->cancelled(); });
  }
  void drop_cancelled() {
    const Clock::time_point now = clock_->now();
    for (auto it = running_.begin(); it != running_.end();) {
      if ((*it)->handle().cancelled()) {
        metrics_.cancelled(1);
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
    if (cache_ && finish_reason) cache_->on_retire(s.tokens(), s.n_computed(), s.table(), s.cache());
    s.table().release(pool_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      RequestHandle* h = &s.handle();
      std::erase_if(running_handles_, [h](const std::shared_ptr<RequestHandle>& p) { return p.get() == h; });
      --n_running_;
      metrics_.retired(s, n_running_, pool_);
    }
    if (finish_reason) s.finish(finish_reason, now);
    return running_.erase(it);
  }

  // What one step runs: each sequence's tokens, in batch order (decoding ones first).
  struct Planned {
    SeqList::iterator seq;
    int32_t n;          // tokens run this step
    bool wants_logits;  // the chunk ends at the sequence's last known token
    // With drafts: the tokens run (the pending one, then the drafts), each with logits;
    // which drafter made them, and what its own passes cost (one-row target passes).
    std::vector<int32_t> chunk;
    Drafter by = Drafter::Ngram;
    double spent = 0;
  };
  struct StepPlan {
    std::vector<Planned> seqs;
    StepShape shape;
  };

  // One forward pass: every decoding sequence's pending token, then prompt chunks within
  // the prefill share, split evenly between the prefilling sequences (see prefill_share).
  void step() {
    StepPlan plan = plan_step();
    if (plan.seqs.empty()) {
      retire_warmed(clock_->now());
      return;
    }
    const Clock::time_point start = clock_->now();
    Status st = run_forward(plan.seqs, start);
    clock_->on_forward(plan.shape);
    const Clock::time_point end = clock_->now();
    const double step_ms = std::chrono::duration<double, std::milli>(end - start).count();
    if (st) costs_.observe(plan.shape, step_ms);
    if (st && plan.shape.n_prefill == 0) draft_cost_.target_step(plan.shape.n_decode, step_ms);
    metrics_.step(step_ms);
    if (!st) {
      fail_step(plan.seqs, st.error().message, end);
      return;
    }
    deliver(plan.seqs, end);
    retire_warmed(end);
  }

  StepPlan plan_step() {
    StepPlan plan;
    std::vector<SeqList::iterator> prefilling;
    int32_t n_decode = 0;
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if (!(*it)->prefilling()) plan.seqs.push_back({it, 1, true, {}}), ++n_decode;
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      Sequence& s = **it;
      if (!s.prefilling() || restoring(s)) continue;
      if (cache_) {
        const int32_t before = s.cache().memory_tokens;
        s.on_cached(cache_->extend(s.tokens(), s.n_computed(), s.cacheable(), s.table(), s.cache()));
        if (s.cache().memory_tokens > before)
          metrics_.memory_hit_tokens(static_cast<uint64_t>(s.cache().memory_tokens - before));
        if (waits_for_other(s)) continue;
      }
      if (s.n_pending() == 0) continue;  // a warm prompt wholly attached: ends after this step
      prefilling.push_back(it);
    }
    StepShape& shape = plan.shape;
    shape.n_decode = n_decode;
    double pos_sum = 0;
    const std::vector<int32_t> share = split_evenly(prefill_share(n_decode, prefilling), prefilling);
    for (size_t i = 0; i < prefilling.size(); ++i) {
      if (share[i] == 0) continue;
      Sequence& s = **prefilling[i];
      plan.seqs.push_back({prefilling[i], share[i], share[i] == s.n_pending() && !s.warm(), {}});
      shape.n_prefill += share[i];
      ++shape.n_prefill_seqs;
      pos_sum += share[i] * (s.n_computed() + (share[i] - 1) / 2.0);
    }
    if (shape.n_prefill > 0) shape.prefill_pos = pos_sum / static_cast<double>(shape.n_prefill);
    if (shape.n_prefill == 0) plan_drafts(plan);
    return plan;
  }

  // Rows of a step with drafts, all sequences together: past ~8 rows a pass stops being
  // bound by reading the weights (docs/scheduler.md), and drafts stop being nearly free.
  int64_t verify_rows() const { return std::min<int64_t>(Speculator::kMaxDraft + 1, n_batch_); }

  // Drafts for the decoding sequences of a step that reads no prompt tokens (a step with
  // prompt tokens is compute-bound already), while the step's rows stay within
  // verify_rows(): the n-gram lookup's when it matches, else the draft model's if any. Each
  // drafter of a sequence asks for its own k and pauses on its own losses (DraftGuard).
  // The step budget learns the decode part's cost per row, drafts included.
  void plan_drafts(StepPlan& plan) {
    if (options_.speculative == SchedulerOptions::Speculative::Off) return;
    int64_t rows_left = verify_rows() - plan.shape.n_decode;
    for (Planned& p : plan.seqs) {
      if (rows_left <= 0) return;
      Sequence& s = **p.seq;
      const int32_t pending = static_cast<int32_t>(s.tokens().size()) - 1;
      const int32_t room =
          static_cast<int32_t>(std::min<int64_t>({rows_left, s.n_left() - 1, draft_room(s.table(), pool_, pending)}));
      std::vector<int32_t> draft = s.speculator().draft(s.tokens(), room, s.n_generated());
      if (draft.empty() && options_.draft_model) draft = propose(p, room);
      if (draft.empty()) continue;
      p.chunk.reserve(draft.size() + 1);
      p.chunk.push_back(s.tokens().back());
      p.chunk.insert(p.chunk.end(), draft.begin(), draft.end());
      p.n = static_cast<int32_t>(p.chunk.size());
      rows_left -= static_cast<int64_t>(draft.size());
      plan.shape.n_decode += static_cast<int32_t>(draft.size());
    }
  }

  // The draft model's drafts for p's sequence, timed: its passes are charged to its guard
  // (p.spent, at the measured or configured cost ratio), at once when it proposed nothing.
  std::vector<int32_t> propose(Planned& p, int32_t room) {
    Sequence& s = **p.seq;
    const int32_t k = s.speculator().model_wanted(room, s.n_generated());
    if (k <= 0) return {};
    const Clock::time_point t0 = clock_->now();
    DraftModel::Proposal d = options_.draft_model->propose(s.draft_state(), s.tokens(), k, options_.n_ctx);
    const double ms = std::chrono::duration<double, std::milli>(clock_->now() - t0).count();
    // A first proposal also reads the prompt (a prefill): not a draft pass's cost.
    if (d.n_caught_up <= Speculator::kMaxDraft + 1) draft_cost_.draft_passes(d.n_passes, ms);
    const double ratio = options_.draft_cost_ratio >= 0 ? options_.draft_cost_ratio : draft_cost_.ratio();
    p.by = Drafter::Model;
    p.spent = ratio * d.n_passes;
    if (d.tokens.empty()) s.speculator().verified(Drafter::Model, 0, 0, s.n_generated(), p.spent);
    return std::move(d.tokens);
  }

  // Runs the planned tokens through the model and reads the wanted logits into logits_.
  Status run_forward(const std::vector<Planned>& plan, Clock::time_point start) {
    ForwardBatch batch;
    int64_t row = 0;
    for (const Planned& p : plan) {
      Sequence& s = **p.seq;
      const int32_t first = s.n_computed();
      // The pool holds n_ctx tokens for every running sequence, and its companions the
      // windows of every step (sliding_blocks), so this cannot fail.
      if (!s.table().reserve(pool_, first + p.n)) return make_error("the KV cache has no free block (a bug)");
      if (s.prefilling()) s.on_prefill_chunk(start);
      const std::span<const int32_t> tokens =
          p.chunk.empty()
              ? std::span<const int32_t>(s.tokens()).subspan(static_cast<size_t>(first), static_cast<size_t>(p.n))
              : std::span<const int32_t>(p.chunk);
      batch.seqs.push_back(SeqChunk{
          tokens, first, s.table().slots(),
          pool_.bounded_sliding() ? std::span<const int32_t>(s.table().sliding_slots()) : std::span<const int32_t>()});
      for (int64_t r = p.chunk.empty() ? p.n - 1 : 0; r < p.n && p.wants_logits; ++r)
        batch.logit_rows.push_back(static_cast<int32_t>(row + r));
      row += p.n;
    }
    graph_.clear();
    model_.build_forward(graph_, batch, buffers_.act, buffers_.kv);
    if (Status st = backend_.execute(graph_); !st) return st;
    if (batch.logit_rows.empty()) return {};
    logits_.resize(batch.logit_rows.size() * static_cast<size_t>(model_.config().n_vocab));
    return backend_.read(*buffers_.act.logits.buffer, buffers_.act.logits.offset, logits_.data(),
                         logits_.size() * sizeof(float));
  }

  // A failed forward pass or logits read fails every request of the step.
  void fail_step(std::vector<Planned>& plan, const std::string& message, Clock::time_point end) {
    LOG_ERROR("engine: forward pass failed: " + message);
    for (Planned& p : plan) {
      RequestEvent ev;
      ev.kind = RequestEvent::Kind::Failed;
      ev.error = "the forward pass failed: " + message;
      (*p.seq)->handle().push(std::move(ev));
      retire(p.seq, nullptr, end);
    }
  }

  // The step's tokens have KV now: the prompt cache names them, and each sequence whose
  // logits were read samples its next token (and may end).
  void deliver(std::vector<Planned>& plan, Clock::time_point end) {
    const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
    size_t logit_row = 0;
    for (Planned& p : plan) {
      Sequence& s = **p.seq;
      if (!p.chunk.empty()) {
        deliver_verified(p, logits_.data() + logit_row * n_vocab, end);
        logit_row += p.chunk.size();
        continue;
      }
      s.on_computed(p.n, end);
      if (cache_) cache_->on_computed(s.tokens(), s.n_computed(), s.table(), s.cache());
      // Written to disk above where a store takes it, the sliding-window KV before the next
      // position's window goes back to the pool.
      s.table().slide(pool_, first_window_block(s.n_computed(), model_.config().sliding_window, pool_.block_tokens()));
      if (!p.wants_logits) continue;
      const size_t n_itl_before = s.itl_ms().size();
      const int32_t n_before = s.n_generated();
      const char* finished = s.on_logits(logits_.data() + logit_row++ * n_vocab, static_cast<int32_t>(n_vocab), end);
      metrics_.tokens(s, n_before, n_itl_before);
      if (finished) retire(p.seq, finished, end);
    }
  }

  // A step with drafts: the sequence keeps the tokens its sampler agrees with; only their
  // KV counts as computed (the prompt cache and the disk writer see no other), and the
  // blocks past them go back to the pool before it can retire.
  void deliver_verified(Planned& p, float* rows, Clock::time_point end) {
    Sequence& s = **p.seq;
    const size_t n_itl_before = s.itl_ms().size();
    const int32_t n_before = s.n_generated();
    const std::span<const int32_t> draft = std::span<const int32_t>(p.chunk).subspan(1);
    const Sequence::Verified v = s.verify(rows, model_.config().n_vocab, draft, p.by, p.spent, end);
    metrics_.tokens(s, n_before, n_itl_before, {p.by, static_cast<int32_t>(draft.size()), v.n_valid - 1});
    s.on_computed(v.n_valid, end);
    if (cache_) cache_->on_computed(s.tokens(), s.n_computed(), s.table(), s.cache());
    s.table().slide(pool_, first_window_block(s.n_computed(), model_.config().sliding_window, pool_.block_tokens()));
    drop_unverified(s.table(), pool_, s.n_computed());
    if (v.finished) retire(p.seq, v.finished, end);
  }

  // Prompt tokens this step reads, all sequences together. Next to decoding streams, as
  // many as the learned costs fit in the step budget (at most prefill_chunk); with no
  // stream waiting, or no budget, prefill_chunk (0: as many as the batch holds).
  int64_t prefill_share(int32_t n_decode, const std::vector<SeqList::iterator>& prefilling) const {
    if (prefilling.empty()) return 0;
    int64_t upper = n_batch_ - n_decode;
    if (options_.prefill_chunk > 0) upper = std::min<int64_t>(upper, options_.prefill_chunk);
    if (n_decode == 0 || options_.step_budget_ms <= 0) return upper;
    // Priced at the furthest prompt's position: its tokens attend to the most context.
    int32_t first = 0;
    for (const SeqList::iterator& it : prefilling) first = std::max(first, (*it)->n_computed());
    return costs_.prefill_tokens(options_.step_budget_ms, n_decode, first, upper);
  }

  // Splits `total` prompt tokens between the prefilling sequences: an even share each, the
  // remainder to those with the most left to read, and what a sequence does not need goes
  // to the others. Two long prompts that arrive together both move at every step, and
  // neither pulls ahead, rather than one waiting for the other to finish.
  static std::vector<int32_t> split_evenly(int64_t total, const std::vector<SeqList::iterator>& prefilling) {
    std::vector<int32_t> share(prefilling.size(), 0);
    std::vector<size_t> order(prefilling.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return (*prefilling[x])->n_pending() > (*prefilling[y])->n_pending(); });
    auto want = [&](size_t i) { return static_cast<int64_t>((*prefilling[i])->n_pending()) - share[i]; };
    // Each round either hands out all that is left or fills some sequence's whole need.
    for (;;) {
      int64_t open = 0;
      for (size_t i = 0; i < share.size(); ++i) open += want(i) > 0;
      if (total <= 0 || open == 0) break;
      const int64_t each = total / open;
      int64_t extra = total % open;
      for (size_t i : order) {
        if (want(i) <= 0) continue;
        const int64_t give = std::min(want(i), each + (extra > 0 ? 1 : 0));
        if (extra > 0) --extra;
        share[i] += static_cast<int32_t>(give);
        total -= give;
      }
    }
    return share;
  }

  // Warm requests whose prompt is all in the cache now end: nothing is generated.
  void retire_warmed(Clock::time_point now) {
    for (auto it = running_.begin(); it != running_.end();)
      it = ((*it)->warm() && !(*it)->prefilling()) ? retire(it, "warmed", now) : std::next(it);
  }

  // K and V of one token, every layer, in the KV pool.
  // K and V of one token in the pool's layers: all of them, or without companions the
  // full-attention ones only (the sliding-window layers hold a window per sequence).
  int64_t kv_token_bytes() const {
    const ModelConfig& c = model_.config();
    const int32_t layers = c.n_layer - (pool_.bounded_sliding() ? c.n_sliding_layers() : 0);
    return static_cast<int64_t>(row_bytes(options_.kv_type, c.kv_dim())) * 2 * layers;
  }

  void publish_gauges() {
    std::lock_guard<std::mutex> lock(mutex_);  // n_running_
    metrics_.pool(pool_, kv_token_bytes(), kv_pool_bytes(model_.config(), options_), n_running_);
  }

  const Model& model_;
  Backend& backend_;
  const Tokenizer& tokenizer_;
  const SchedulerOptions options_;
  const std::shared_ptr<StepClock> clock_;
  const TokenWork work_;                        // the model's cost of a token, for the GOP/s and GB/s in timings
  std::unique_ptr<storage::ChunkStore> store_;  // the disk tier, or null

  // Engine thread only.
  BlockPool pool_;
  ForwardBuffers buffers_;
  int64_t n_batch_ = 0;
  StepCostModel costs_;        // learned from this engine's steps
  DraftCostMeter draft_cost_;  // the draft model's pass against the target's, measured here
  Graph graph_;
  std::vector<float> logits_;
  SeqList running_;
  std::unique_ptr<PrefixCache> cache_;
  std::thread thread_;

  // The engine's lock and wake-up, shared with the request handles (a cancel wakes the
  // engine) and kept alive by them: a handle may outlive the scheduler.
  struct Wakeup {
    std::mutex mutex;
    std::condition_variable cv;
  };
  const std::shared_ptr<Wakeup> wakeup_ = std::make_shared<Wakeup>();

  // Shared, under mutex_.
  std::mutex& mutex_ = wakeup_->mutex;
  std::condition_variable& wake_ = wakeup_->cv;
  std::deque<Queued> queue_;
  std::vector<std::shared_ptr<RequestHandle>> running_handles_;  // for cancel_all
  int64_t n_running_ = 0;
  bool accepting_ = true;
  bool quit_ = false;
  bool restore_read_ = false;  // a restore's chunks are all read (set by a reader thread)
  EngineMetrics metrics_;      // has its own lock; taken under mutex_ at times, never the reverse
  std::vector<std::packaged_task<void()>> tasks_;
  bool engine_done_ = false;
};

uint64_t kv_pool_bytes(const ModelConfig& c, const SchedulerOptions& o) {
  const int32_t n_blocks = pool_blocks(o);
  const int32_t n_sliding = sliding_blocks(c, o, n_blocks);
  const uint64_t row = row_bytes(o.kv_type, c.kv_dim());
  uint64_t slots = 0;
  for (int il = 0; il < c.n_layer; ++il)
    slots += static_cast<uint64_t>(c.layer_sliding(il) && n_sliding > 0 ? n_sliding : n_blocks);
  return 2 * slots * static_cast<uint64_t>(o.block_tokens) * row;
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(const Model& model, Backend& backend, const Tokenizer& tokenizer,
                                                     const SchedulerOptions& o,
                                                     std::unique_ptr<storage::ChunkStore> store) {
  if (o.n_parallel < 1 || o.n_parallel > 256) return make_error("scheduler: parallel must be in [1, 256]");
  if (o.n_ctx < 2) return make_error("scheduler: the context must hold at least 2 tokens");
  if (o.prefill_chunk < 0) return make_error("scheduler: prefill chunk must be >= 0");
  if (!(o.step_budget_ms >= 0) || o.step_budget_ms > 1e7)
    return make_error("scheduler: step budget must be in [0, 1e7] ms");
  if (o.queue_max < 0) return make_error("scheduler: queue length must be >= 0");
  if (o.block_tokens < 1) return make_error("scheduler: block size must be positive");
  if (Status s = check_kv_type(model.config(), backend, o.kv_type); !s)
    return make_error("scheduler: " + s.error().message);
  if (store) {
    if (o.model_fingerprint.empty() ||
        !storage::same_format(store->format(), kv_format(model.config(), o.kv_type, o.model_fingerprint)))
      return make_error("scheduler: the chunk store's format is not this model's KV in this KV type");
  }
  auto impl = std::make_unique<Impl>(model, backend, tokenizer, o, std::move(store));
  if (Status s = impl->init(); !s) return s.error();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;
Submitted Scheduler::submit(GenerationRequest request, std::function<void()> on_event) {
  return impl_->submit(std::move(request), std::move(on_event));
}
void Scheduler::stop_accepting() {
  impl_->stop_accepting();
}
void Scheduler::cancel_all() {
  impl_->cancel_all();
}
int64_t Scheduler::in_flight() const {
  return impl_->in_flight();
}
SchedulerStats Scheduler::stats() const {
  return impl_->stats();
}
CacheStats Scheduler::cache_stats() const {
  return impl_->cache_stats();
}
Status Scheduler::clear_cache(bool all_models, std::optional<uint32_t> owner) {
  return impl_->clear_cache(all_models, owner);
}
size_t Scheduler::close_cache(std::chrono::milliseconds timeout) {
  return impl_->close_cache(timeout);
}
const SchedulerOptions& Scheduler::options() const {
  return impl_->options();
}

}  // namespace hearth
