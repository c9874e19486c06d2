// The CPU thread pool: every task of every job runs exactly once, whatever the number of
// threads (more threads than cores included, as on a busy machine), the caller's view of
// the job's results is complete when run() returns, and per-thread indices stay in range.
#include "backends/cpu/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu/ops.h"

namespace {

using hearth::cpu::ThreadPool;

// Runs `jobs` jobs; in each, every task adds its index + 1 to its own slot, so a task run
// twice, skipped, or run in another job's slot shows in the sums.
void check_every_task_once(int n_threads, int jobs) {
  ThreadPool pool(n_threads);
  const int n_tasks = pool.n_tasks();
  REQUIRE(n_tasks >= n_threads);
  std::vector<int64_t> sums(static_cast<size_t>(n_tasks), 0);
  std::vector<std::atomic<int>> workers_seen(static_cast<size_t>(n_threads));
  for (int j = 0; j < jobs; ++j) {
    pool.run([&](int task, int nt) {
      REQUIRE(nt == n_tasks);
      const int w = ThreadPool::current_worker();
      REQUIRE(w >= 0);
      REQUIRE(w < n_threads);
      workers_seen[static_cast<size_t>(w)].fetch_add(1, std::memory_order_relaxed);
      sums[static_cast<size_t>(task)] += task + 1;  // plain writes: run() must publish them
    });
    for (int t = 0; t < n_tasks; ++t) {
      REQUIRE(sums[static_cast<size_t>(t)] == static_cast<int64_t>(j + 1) * (t + 1));
    }
  }
  CHECK(ThreadPool::current_worker() == 0);
  CHECK(pool.stats().jobs == static_cast<uint64_t>(jobs));
}

}  // namespace

TEST_CASE("thread pool: every task of every job runs exactly once", "[thread_pool]") {
  for (int n : {1, 2, 3, 4}) {
    INFO("threads " << n);
    check_every_task_once(n, 2000);
  }
}

TEST_CASE("thread pool: more threads than cores still finish every job", "[thread_pool]") {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  check_every_task_once(4 * cores, 300);
}

TEST_CASE("thread pool: jobs after the workers have gone to sleep", "[thread_pool]") {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  for (int j = 0; j < 5; ++j) {
    // Longer than any spin, so every worker sleeps on the futex before the next job.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pool.run([&](int, int) { ran.fetch_add(1); });
  }
  CHECK(ran.load() == 5 * pool.n_tasks());
  CHECK(pool.stats().worker_sleeps > 0);
}

TEST_CASE("thread pool: a descheduled worker does not hold up the job", "[thread_pool]") {
  // The first task claimed blocks its thread until every other task has run: it stands
  // for a worker the OS has taken off the core. With tasks claimed one by one the other
  // thread runs all the rest; a pool that handed each thread a fixed share would wait
  // here until the hang guard gives up.
  for (int n : {2, 3}) {
    ThreadPool pool(n);
    const int n_tasks = pool.n_tasks();
    std::atomic<int> ran{0};
    std::atomic<bool> blocker_taken{false};
    std::atomic<bool> gave_up{false};
    pool.run([&](int, int) {
      if (!blocker_taken.exchange(true)) {
        const auto guard = std::chrono::steady_clock::now() + std::chrono::minutes(5);  // hang guard
        while (ran.load() < n_tasks - 1) {
          if (std::chrono::steady_clock::now() > guard) {
            gave_up = true;
            break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      }
      ran.fetch_add(1);
    });
    INFO("threads " << n);
    CHECK_FALSE(gave_up.load());
    CHECK(ran.load() == n_tasks);
  }
}

TEST_CASE("thread pool: destroyed while its workers sleep or spin", "[thread_pool]") {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    if (i % 2) pool.run([](int, int) {});
  }
  SUCCEED();
}

TEST_CASE("run_split: one unit runs on the calling thread as the only task, more as a pool job", "[thread_pool]") {
  // A decode step's one-row ops take the first path: no job, so no synchronisation.
  ThreadPool pool(2);
  hearth::cpu::ExecContext ctx;
  ctx.pool = &pool;
  const std::thread::id caller = std::this_thread::get_id();
  for (int64_t units : {0, 1}) {
    std::vector<std::pair<int, int>> calls;
    hearth::cpu::run_split(ctx, units, [&](int task, int nt) {
      CHECK(std::this_thread::get_id() == caller);
      calls.emplace_back(task, nt);
    });
    CHECK(calls == std::vector<std::pair<int, int>>{{0, 1}});
  }
  CHECK(pool.stats().jobs == 0);
  std::atomic<int> tasks{0};
  hearth::cpu::run_split(ctx, 2, [&](int, int nt) {
    CHECK(nt == pool.n_tasks());
    tasks.fetch_add(1);
  });
  CHECK(tasks.load() == pool.n_tasks());
  CHECK(pool.stats().jobs == 1);
}
