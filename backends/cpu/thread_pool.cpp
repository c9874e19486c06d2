#include "backends/cpu/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/thread_name.h"

namespace hearth::cpu {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// How long a thread with nothing to do spins before it sleeps. The caller waits for the
// tail of a job (a few microseconds when every thread runs); a worker waits for the next
// job, which in decode comes ~5-100 us later. A futex wake-up costs ~5-50 us.
constexpr int64_t kCallerSpinNs = 50'000;
constexpr int64_t kWorkerSpinNs = 100'000;
// A gap this long between two clock reads of a spin loop means the spinning thread was
// descheduled: more threads want the cores than there are cores.
constexpr int64_t kPreemptedNs = 200'000;
// For this long after such a gap, waits spin only briefly (kContendedSpinNs) before they
// sleep, so spinning threads do not take the cores from the threads that have work.
constexpr int64_t kContendedNs = 100'000'000;
constexpr int64_t kContendedSpinNs = 2'000;

void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected) {
  // Returns at once (EAGAIN) when the word no longer holds `expected`; spurious wake-ups
  // are handled by the callers' loops.
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(const std::atomic<uint32_t>& word, int n) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

thread_local int t_worker = 0;

}  // namespace

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain 32-bit integers");

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), n_tasks_(n_threads_ == 1 ? 1 : n_threads_ * kTasksPerThread) {
  for (int i = 1; i < n_threads_; ++i)
    workers_.emplace_back([this, i] {
      set_thread_name("hearth-pool-" + std::to_string(i));
      worker_loop(i);
    });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  futex_wake(generation_, INT_MAX);
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::current_worker() {
  return t_worker;
}

ThreadPool::Stats ThreadPool::stats() const {
  return {n_jobs_.load(), n_caller_sleeps_.load(), n_worker_sleeps_.load(), n_contended_.load()};
}

bool ThreadPool::contended() const {
  return now_ns() < contended_until_ns_.load(std::memory_order_relaxed);
}

bool ThreadPool::spin_while_equal(const std::atomic<uint32_t>& word, uint32_t seen, int64_t budget_ns) {
  const int64_t start = now_ns();
  int64_t last = start;
  for (;;) {
    for (int k = 0; k < 16; ++k) {
      if (word.load(std::memory_order_acquire) != seen) return true;
      cpu_relax();
    }
    const int64_t t = now_ns();
    if (t - last > kPreemptedNs) {
      contended_until_ns_.store(t + kContendedNs, std::memory_order_relaxed);
      n_contended_.fetch_add(1, std::memory_order_relaxed);
      budget_ns = std::min(budget_ns, kContendedSpinNs);
    }
    if (t - start > budget_ns) return word.load(std::memory_order_acquire) != seen;
    last = t;
  }
}

int ThreadPool::run_tasks(uint32_t gen, int ith) {
  t_worker = ith;
  int done = 0;
  uint64_t v = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(v >> 32) != gen || static_cast<uint32_t>(v) >= static_cast<uint32_t>(n_tasks_)) break;
    if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The claim succeeded in job `gen`, which cannot end before this task is counted, so
    // job_ is that job's.
    (*job_)(static_cast<int>(v & 0xffffffffu), n_tasks_);
    ++done;
    if (finished_.fetch_add(1) + 1 == static_cast<uint32_t>(n_tasks_) && caller_asleep_.load()) {
      futex_wake(finished_, 1);
    }
    v = claim_.load(std::memory_order_acquire);
  }
  t_worker = 0;
  return done;
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  n_jobs_.fetch_add(1, std::memory_order_relaxed);
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  finished_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen);
  if (sleepers_.load() > 0) futex_wake(generation_, INT_MAX);

  run_tasks(gen, 0);
  const uint32_t all = static_cast<uint32_t>(n_tasks_);
  for (uint32_t f; (f = finished_.load(std::memory_order_acquire)) != all;) {
    if (spin_while_equal(finished_, f, contended() ? kContendedSpinNs : kCallerSpinNs)) continue;
    // Dekker-style hand-shake with run_tasks: either the last worker sees the flag and
    // wakes us, or we see its count and do not sleep.
    caller_asleep_.store(true);
    if (finished_.load() == f) {
      n_caller_sleeps_.fetch_add(1, std::memory_order_relaxed);
      futex_wait(finished_, f);
    }
    caller_asleep_.store(false);
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int ith) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      if (spin_while_equal(generation_, seen, contended() ? kContendedSpinNs : kWorkerSpinNs)) continue;
      sleepers_.fetch_add(1);
      if (generation_.load() == seen) {
        n_worker_sleeps_.fetch_add(1, std::memory_order_relaxed);
        futex_wait(generation_, seen);
      }
      sleepers_.fetch_sub(1);
    }
    seen = gen;
    if (stop_.load()) return;
    run_tasks(gen, ith);
  }
}

int physical_core_count() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    auto value = [&] {
      auto p = line.find(':');
      return p == std::string::npos ? std::string() : line.substr(p + 2);
    };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace hearth::cpu
