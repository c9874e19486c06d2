// A fixed pool of worker threads that run one parallel job at a time for the engine
// thread (the only caller). run(fn) calls fn(task, n_tasks) once for every task in
// [0, n_tasks) and returns when all calls have returned. n_tasks is a few times the
// thread count: tasks are claimed one by one from a shared counter, so a thread the OS
// has descheduled holds up at most the one task it is running, and the others (the
// caller included) take the rest. Kernels split their work by (task, n_tasks) exactly as
// they would by thread; a row's arithmetic never depends on which thread runs it.
//
// Waiting: a thread that has nothing to do spins for a short, bounded time (decode issues
// hundreds of small jobs per token, ~5-100 us apart, and a futex wake-up costs more than
// that) and then sleeps on a futex, so an idle daemon uses no CPU. When a spinning thread
// notices that it was itself descheduled (a gap of over kPreemptedNs between two clock
// reads) the machine is oversubscribed: for the next kContendedNs every wait skips the
// spin and sleeps at once, leaving the cores to the threads that have work.
#pragma once

#include <atomic>
#include <cstdint>
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
  // Tasks per job: kTasksPerThread per thread, 1 for a single-threaded pool.
  int n_tasks() const { return n_tasks_; }
  void run(const std::function<void(int task, int n_tasks)>& fn);

  // The index in [0, size()) of the calling thread while it runs a task of this pool's
  // job (0 on the caller), for per-thread scratch memory.
  static int current_worker();

  // Counters for tests and benchmarks: futex sleeps of the caller and of the workers.
  struct Stats {
    uint64_t jobs = 0, caller_sleeps = 0, worker_sleeps = 0, contended_waits = 0;
  };
  Stats stats() const;

  static constexpr int kTasksPerThread = 4;

 private:
  void worker_loop(int ith);
  // Claims and runs tasks of job `gen` until none are left; returns how many it ran.
  int run_tasks(uint32_t gen, int ith);
  // Spins up to the current budget while `word` still holds `seen`; false when the
  // budget ran out (the caller then sleeps on the futex).
  bool spin_while_equal(const std::atomic<uint32_t>& word, uint32_t seen, int64_t budget_ns);
  bool contended() const;

  int n_threads_;
  int n_tasks_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  // (generation << 32) | next task: a task is claimed with a CAS that also checks the
  // generation, so a worker that wakes late can never take a task of a later job.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> generation_{0};  // workers sleep on it (futex word)
  std::atomic<uint32_t> finished_{0};    // tasks finished in this job; the caller sleeps on it
  std::atomic<int> sleepers_{0};         // workers asleep (or about to be) on generation_
  std::atomic<bool> caller_asleep_{false};
  std::atomic<int64_t> contended_until_ns_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> n_jobs_{0}, n_caller_sleeps_{0}, n_worker_sleeps_{0}, n_contended_{0};
};

// Number of physical cores (threads sharing a core counted once), at least 1.
int physical_core_count();

}  // namespace hearth::cpu
