// A fixed pool of worker threads that run one parallel job at a time for the engine
// thread (the only caller). run(fn) calls fn(ith, nth) once for every ith in [0, nth) —
// ith 0 on the calling thread — and returns when all calls have returned.
//
// Workers spin briefly after a job (decode issues hundreds of small jobs per token) and
// then sleep on an atomic wait, so an idle daemon uses no CPU.
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace hearth::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(const std::function<void(int ith, int nth)>& fn);

 private:
  void worker_loop(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Number of physical cores (threads sharing a core counted once), at least 1.
int physical_core_count();

}  // namespace hearth::cpu
