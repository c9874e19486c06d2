// Runs CUDA kernels on the host, so that their indexing, barriers and warp collectives are
// tested on machines without a GPU. A test compiled by the host compiler (not nvcc)
// includes this header, then a kernel file of backends/cuda/ itself; every launch there goes
// through HEARTH_LAUNCH (cu_common.cuh), which this header turns into a call of Launcher.
//
// A block's threads are fibers (ucontext) on the calling thread, switched at every barrier:
// __syncthreads waits for the block's live threads, a warp collective (__shfl_xor_sync,
// __shfl_sync, __ballot_sync, __syncwarp) for its warp's; a thread that returns leaves its
// barriers (as a GPU's exited threads do). __shared__ arrays become static: blocks run one
// after another. A barrier nobody can pass is reported (a deadlock on a GPU) and aborts.
//
// What it cannot show: timing, memory-model races (fibers switch only at barriers, so a
// missing barrier between a store and another warp's load is caught only where the order
// of fibers exposes it: warps run in index order, so a warp reading what a later warp
// writes before a barrier sees stale data, as on a GPU it may), and device arithmetic
// (contraction into fma, expf's ulp).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#define HEARTH_CUDA_ON_HOST 1

namespace hearth::cuda::host_emu {

struct Barrier {
  int expected = 0, arrived = 0;
  unsigned generation = 0;
};

struct Fiber {
  ucontext_t ctx{};
  std::unique_ptr<char[]> stack;
  dim3 tid;
  int linear = 0;
  bool done = false;
  Barrier* waiting = nullptr;  // blocked on it
  unsigned wait_generation = 0;
};

class Scheduler {
 public:
  static constexpr size_t kStack = size_t{256} << 10;

  // Runs fn once per thread of a block of `block` threads, block index `bid`, to completion.
  void run_block(dim3 grid, dim3 block, dim3 bid, const std::function<void()>& fn) {
    const int n = static_cast<int>(block.x * block.y * block.z);
    grid_ = grid;
    block_dim_ = block;
    bid_ = bid;
    fn_ = &fn;
    if (static_cast<int>(fibers_.size()) < n) fibers_.resize(static_cast<size_t>(n));
    block_bar_ = Barrier{n, 0, 0};
    warp_bars_.assign(static_cast<size_t>((n + 31) / 32), Barrier{});
    for (int w = 0; w * 32 < n; ++w) warp_bars_[static_cast<size_t>(w)].expected = std::min(32, n - 32 * w);
    n_ = n;
    for (int i = 0; i < n; ++i) {
      Fiber& f = fibers_[static_cast<size_t>(i)];
      if (!f.stack) f.stack = std::make_unique<char[]>(kStack);
      f.linear = i;
      f.tid = dim3(static_cast<unsigned>(i) % block.x, static_cast<unsigned>(i) / block.x % block.y,
                   static_cast<unsigned>(i) / (block.x * block.y));
      f.done = false;
      f.waiting = nullptr;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.get();
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &main_;
      makecontext(&f.ctx, &Scheduler::trampoline, 0);
    }
    for (;;) {
      bool progress = false, all_done = true;
      for (int i = 0; i < n; ++i) {
        Fiber& f = fibers_[static_cast<size_t>(i)];
        if (f.done) continue;
        all_done = false;
        if (f.waiting != nullptr && f.waiting->generation == f.wait_generation) continue;
        f.waiting = nullptr;
        current_ = i;
        swapcontext(&main_, &f.ctx);
        progress = true;
      }
      if (all_done) return;
      if (!progress) {
        std::fprintf(stderr, "cuda_on_host: block (%u, %u, %u) deadlocked at a barrier\n", bid.x, bid.y, bid.z);
        std::abort();
      }
    }
  }

  Fiber& self() { return fibers_[static_cast<size_t>(current_)]; }
  int lane() { return self().linear % 32; }
  dim3 thread_idx() { return self().tid; }
  dim3 block_idx() const { return bid_; }
  dim3 block_dim() const { return block_dim_; }
  dim3 grid_dim() const { return grid_; }

  void sync_block() { wait(block_bar_); }
  void sync_warp() { wait(warp_bars_[static_cast<size_t>(self().linear / 32)]); }

  // The value lane `src` put in, after every live lane of the warp put its own.
  template <class T>
  T exchange(T v, int src) {
    static_assert(sizeof(T) <= sizeof(uint64_t));
    uint64_t* slots = warp_slots_[self().linear / 32 % kMaxWarps];
    std::memcpy(&slots[lane()], &v, sizeof v);
    sync_warp();
    T r;
    std::memcpy(&r, &slots[src & 31], sizeof r);
    sync_warp();
    return r;
  }

  static Scheduler& get() {
    static Scheduler s;
    return s;
  }

 private:
  static constexpr int kMaxWarps = 32;

  static void trampoline() {
    Scheduler& s = get();
    (*s.fn_)();
    Fiber& f = s.self();
    f.done = true;
    // Leave the barriers: an exited thread is not waited for.
    s.drop(s.block_bar_);
    s.drop(s.warp_bars_[static_cast<size_t>(f.linear / 32)]);
  }  // returns to main_ (uc_link)

  void release(Barrier& b) {
    b.arrived = 0;
    ++b.generation;
  }
  void drop(Barrier& b) {
    --b.expected;
    if (b.arrived > 0 && b.arrived == b.expected) release(b);
  }
  void wait(Barrier& b) {
    if (++b.arrived == b.expected) {
      release(b);
      return;
    }
    Fiber& f = self();
    f.waiting = &b;
    f.wait_generation = b.generation;
    swapcontext(&f.ctx, &main_);
  }

  std::vector<Fiber> fibers_;
  ucontext_t main_{};
  int current_ = 0, n_ = 0;
  const std::function<void()>* fn_ = nullptr;
  dim3 grid_, block_dim_, bid_;
  Barrier block_bar_;
  std::vector<Barrier> warp_bars_;
  uint64_t warp_slots_[kMaxWarps][32] = {};
};

// HEARTH_LAUNCH(grid, block, stream, kernel)(args...): every block in turn.
template <class... P>
struct Launcher {
  dim3 grid, block;
  void (*kernel)(P...);
  template <class... A>
  void operator()(A&&... args) const {
    const std::function<void()> fn = [&] { kernel(args...); };
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) Scheduler::get().run_block(grid, block, dim3(x, y, z), fn);
  }
};
template <class... P>
Launcher<P...> launcher(dim3 grid, dim3 block, void (*kernel)(P...)) {
  return {grid, block, kernel};
}

}  // namespace hearth::cuda::host_emu

#define HEARTH_LAUNCH(grid, block, stream, ...) \
  ((void)(stream), ::hearth::cuda::host_emu::launcher(dim3(grid), dim3(block), __VA_ARGS__))

#define threadIdx (::hearth::cuda::host_emu::Scheduler::get().thread_idx())
#define blockIdx (::hearth::cuda::host_emu::Scheduler::get().block_idx())
#define blockDim (::hearth::cuda::host_emu::Scheduler::get().block_dim())
#define gridDim (::hearth::cuda::host_emu::Scheduler::get().grid_dim())

inline void __syncthreads() {
  ::hearth::cuda::host_emu::Scheduler::get().sync_block();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::hearth::cuda::host_emu::Scheduler::get().sync_warp();
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int off) {
  auto& s = ::hearth::cuda::host_emu::Scheduler::get();
  return s.exchange(v, s.lane() ^ off);
}
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return ::hearth::cuda::host_emu::Scheduler::get().exchange(v, src);
}
inline unsigned __ballot_sync(unsigned, int pred) {
  auto& s = ::hearth::cuda::host_emu::Scheduler::get();
  unsigned mask = 0;
  const unsigned mine = pred ? 1u << s.lane() : 0u;
  for (int l = 0; l < 32; ++l) mask |= s.exchange(mine, l);
  return mask;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
