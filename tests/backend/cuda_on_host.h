// Runs CUDA kernels on the host, so that their indexing, barriers and warp collectives are
// tested on machines without a GPU. A test compiled by the host compiler (not nvcc)
// includes this header, then a kernel file of backends/cuda/ itself; every launch there goes
// through HEARTH_LAUNCH (cu_common.cuh), which this header turns into a call of Launcher.
//
// A block's threads are fibers on the calling thread, switched at every barrier:
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

// cp.async (cu_matmul.cu's staging) as plain copies, complete at once: the header's own
// definitions are device code. Its include guard keeps it out.
#define _CUDA_PIPELINE_PRIMITIVES_H_
inline void __pipeline_memcpy_async(void* dst, const void* src, size_t n, size_t = 0) {
  std::memcpy(dst, src, n);
}
inline void __pipeline_commit() {}
inline void __pipeline_wait_prior(size_t) {}
// The device's integer min and max (the kernels call them unqualified).
template <class T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
inline T max(T a, T b) {
  return a < b ? b : a;
}
// The tensor-core MatMul traps below compute capability 8.0, which the host is.
[[noreturn]] inline void __trap() {
  std::abort();
}

#include <functional>
#include <memory>
#include <vector>

#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#define HEARTH_CUDA_ON_HOST 1

// Switching fibers: on x86-64 a dozen instructions that save the callee-saved registers
// on the stack and swap stack pointers (ucontext's swapcontext also saves the signal mask,
// a system call per switch, which made the tests 20 times slower); elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void hearth_emu_switch(void** save_sp, void* load_sp);
// Weak: every test file that includes this header defines it, the linker keeps one.
asm(R"(
  .text
  .weak hearth_emu_switch
  .type hearth_emu_switch, @function
hearth_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size hearth_emu_switch, .-hearth_emu_switch
)");
#endif

namespace hearth::cuda::host_emu {

struct Barrier {
  int expected = 0, arrived = 0;
  unsigned generation = 0;
};

struct Fiber {
#if defined(__x86_64__)
  void* sp = nullptr;  // its saved stack pointer
#else
  ucontext_t ctx{};
#endif
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
    for (int i = 0; i < n; ++i) {
      Fiber& f = fibers_[static_cast<size_t>(i)];
      if (!f.stack) f.stack = std::make_unique<char[]>(kStack);
      f.linear = i;
      f.tid = dim3(static_cast<unsigned>(i) % block.x, static_cast<unsigned>(i) / block.x % block.y,
                   static_cast<unsigned>(i) / (block.x * block.y));
      f.done = false;
      f.waiting = nullptr;
      start(f);
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
        resume(f);
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

  // The warp's lanes whose pred is set, as bits by lane (an exited lane counts as it last
  // voted; kernels call it with every lane of the warp alive).
  unsigned ballot(bool pred) {
    uint64_t* slots = warp_slots_[self().linear / 32 % kMaxWarps];
    slots[lane()] = pred ? 1 : 0;
    sync_warp();
    unsigned mask = 0;
    const int base = self().linear / 32 * 32;
    const int lanes = std::min(32, static_cast<int>(block_dim_.x * block_dim_.y * block_dim_.z) - base);
    for (int l = 0; l < lanes; ++l)
      if (slots[l] != 0) mask |= 1u << l;
    sync_warp();
    return mask;
  }

  // mma.sync.m16n8k8 .tf32 over the warp: the lanes' fragments gathered by the PTX ISA's
  // tables (g = lane / 4, t = lane % 4: A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
  // a3 (g + 8, t + 4); B b0 (t, g), b1 (t + 4, g); C c0 (g, 2t), c1 (g, 2t + 1),
  // c2 (g + 8, 2t), c3 (g + 8, 2t + 1)), D = C + A B in double, scattered back.
  void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    Mma& m = mma_[self().linear / 32 % kMaxWarps];
    const int l = lane();
    std::memcpy(m.a[l], a, sizeof m.a[l]);
    m.b[l][0] = b0;
    m.b[l][1] = b1;
    std::memcpy(m.c[l], c, sizeof m.c[l]);
    sync_warp();
    if (l == 0) m.run();
    sync_warp();
    std::memcpy(c, m.d[l], sizeof m.d[l]);
  }

  static Scheduler& get() {
    static Scheduler s;
    return s;
  }

 private:
  static constexpr int kMaxWarps = 32;

  struct Mma {
    uint32_t a[32][4], b[32][2];
    float c[32][4], d[32][4];
    static double f(uint32_t u) {
      float x;
      std::memcpy(&x, &u, 4);
      return x;
    }
    void run() {
      double A[16][8], B[8][8], C[16][8];
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        A[g][t] = f(a[l][0]);
        A[g + 8][t] = f(a[l][1]);
        A[g][t + 4] = f(a[l][2]);
        A[g + 8][t + 4] = f(a[l][3]);
        B[t][g] = f(b[l][0]);
        B[t + 4][g] = f(b[l][1]);
        for (int i = 0; i < 4; ++i) C[g + 8 * (i / 2)][2 * t + i % 2] = c[l][i];
      }
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < 4; ++i) {
          const int r = l / 4 + 8 * (i / 2), n = 2 * (l % 4) + i % 2;
          double sum = C[r][n];
          for (int k = 0; k < 8; ++k) sum += A[r][k] * B[k][n];
          d[l][i] = static_cast<float>(sum);
        }
    }
  };
  Mma mma_[kMaxWarps] = {};

  static void trampoline() {
    Scheduler& s = get();
    (*s.fn_)();
    Fiber& f = s.self();
    f.done = true;
    // Leave the barriers: an exited thread is not waited for.
    s.drop(s.block_bar_);
    s.drop(s.warp_bars_[static_cast<size_t>(f.linear / 32)]);
#if defined(__x86_64__)
    s.yield(f);  // never resumed: done
    std::abort();
#endif
  }  // (ucontext) returns to main_, its uc_link

#if defined(__x86_64__)
  // The new stack, 16-byte aligned at the top, holds what hearth_emu_switch pops: six
  // registers, then trampoline as the return address; above it a null return address of
  // trampoline's own, so that it starts with the stack aligned as after a call.
  void start(Fiber& f) {
    auto top = reinterpret_cast<uintptr_t>(f.stack.get() + kStack) & ~uintptr_t{15};
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&Scheduler::trampoline);
    for (int r = 0; r < 6; ++r) *--sp = nullptr;
    f.sp = sp;
  }
  void resume(Fiber& f) {
    hearth_emu_switch(&main_sp_, f.sp);
  }
  void yield(Fiber& f) {
    hearth_emu_switch(&f.sp, main_sp_);
  }
  void* main_sp_ = nullptr;
#else
  void start(Fiber& f) {
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &main_;
    makecontext(&f.ctx, &Scheduler::trampoline, 0);
  }
  void resume(Fiber& f) {
    swapcontext(&main_, &f.ctx);
  }
  void yield(Fiber& f) {
    swapcontext(&f.ctx, &main_);
  }
  ucontext_t main_{};
#endif

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
    yield(f);
  }

  std::vector<Fiber> fibers_;
  int current_ = 0;
  const std::function<void()>* fn_ = nullptr;
  dim3 grid_, block_dim_, bid_;
  Barrier block_bar_;
  std::vector<Barrier> warp_bars_;
  uint64_t warp_slots_[kMaxWarps][32] = {};
};

// cvt.rna.tf32.f32: 10 mantissa bits, to nearest, ties away from zero (half a unit added
// to the magnitude bits carries into the exponent as it should).
inline uint32_t tf32_rna(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  // inf, nan
  return (u + 0x1000u) & 0xffffe000u;
}
inline void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  Scheduler::get().mma_tf32(c, a, b0, b1);
}

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
  return ::hearth::cuda::host_emu::Scheduler::get().ballot(pred != 0);
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
