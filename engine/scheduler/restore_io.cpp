#include "engine/scheduler/restore_io.h"

#include <string>

#include "common/thread_name.h"

namespace hearth {

RestoreReader::RestoreReader(storage::ChunkStore& store, int n_threads, std::function<void()> on_ready)
    : store_(store), on_ready_(std::move(on_ready)) {
  for (int i = 0; i < n_threads; ++i)
    threads_.emplace_back([this] {
      set_thread_name("hearth-restore");
      run();
    });
}

RestoreReader::~RestoreReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RestoreReader::start(std::shared_ptr<PendingRestore> p, uint64_t scope) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back({std::move(p), kPrefetch, scope});
  }
  wake_.notify_one();
}

// The first job of a restore asks the kernel for every file's part at once (ChunkStore::
// prefetch), then queues the loads: on this machine kind that reads 250 evicted chunk files
// in 27 ms, against 60-70 ms for eight threads that each read theirs when they get to it.
void RestoreReader::prefetch_then_queue(const Job& job) {
  std::vector<storage::PrefetchItem> items;
  for (const ChunkLoad& l : job.restore->loads) items.push_back({l.name, l.sections});
  store_.prefetch(items);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < job.restore->loads.size(); ++i) jobs_.push_back({job.restore, i, job.scope});
  }
  wake_.notify_all();
}

void RestoreReader::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_, with nothing left in flight
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.index == kPrefetch) {
      prefetch_then_queue(job);
      continue;
    }
    ChunkLoad& load = job.restore->loads[job.index];
    load.payload = store_.load(load.name, load.tokens, job.scope, load.sections);
    job.restore->set_done(job.index);
    on_ready_();
  }
}

}  // namespace hearth
