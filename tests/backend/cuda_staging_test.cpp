// The CUDA backend's staged writes (backends/cuda/cu_staging.cpp) against a fake CUDA
// runtime, so that their logic is checked on machines without a GPU: this binary does not
// link the CUDA runtime; it defines the dozen runtime functions Staging calls. A stream is
// a worker thread that runs its queue in order, each copy after a random pause of up to
// 200 us (so the host runs ahead of the copies, as it does on a GPU); an event is the count
// of its records, done when its stream has passed the last one; a wait on an event queues
// a wait for that record on the waiting stream.
//
// What it checks: bytes arrive as written however the writes are cut and packed into the
// pinned slots, even when the caller reuses its memory at once and the copies lag (a slot
// reused before its copies completed would send later bytes); a stream told to wait sees
// every copy queued before the mark; without pinned memory writes still land; a failed
// copy is an error naming the write.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backends/cuda/cu_staging.h"

// --- the fake runtime ----------------------------------------------------------------------

struct CUevent_st {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;  // records issued
  uint64_t done = 0;      // records its stream has passed
};

struct CUstream_st {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  std::thread worker;

  CUstream_st() : worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(f));
    }
    cv.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !busy; });
  }
  void run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        f = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      f();
      {
        std::lock_guard<std::mutex> lock(mu);
        busy = false;
      }
      cv.notify_all();
    }
  }
};

namespace fake {
std::atomic<bool> pinned_fails{false};
std::atomic<bool> copy_fails{false};
std::atomic<int> copies{0};
thread_local std::mt19937 rng(12345);
}  // namespace fake

extern "C" {

cudaError_t cudaGetLastError(void) {
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "a fake failure";
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  s->drain();
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  s->drain();
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = ++e->recorded;
  }
  s->push([e, n] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      e->done = std::max(e->done, n);
    }
    e->cv.notify_all();
  });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  std::unique_lock<std::mutex> lock(e->mu);
  const uint64_t n = e->recorded;
  e->cv.wait(lock, [&] { return e->done >= n; });
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = e->recorded;
  }
  s->push([e, n] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->done >= n; });
  });
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  if (fake::pinned_fails) return cudaErrorMemoryAllocation;
  *p = ::operator new(n);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  ::operator delete(p);
  return cudaSuccess;
}
// Copies from the source as it is when the copy runs, after a pause: a staging slot
// reused too early shows as wrong bytes.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind, cudaStream_t s) {
  if (fake::copy_fails) return cudaErrorInvalidValue;
  ++fake::copies;
  s->push([dst, src, n] {
    std::this_thread::sleep_for(std::chrono::microseconds(fake::rng() % 200));
    std::memcpy(dst, src, n);
  });
  return cudaSuccess;
}

}  // extern "C"

// --- the tests ---------------------------------------------------------------------------

namespace {

using hearth::Status;
using hearth::cuda::Staging;

// Writes of 1 byte to 3 MiB at random offsets of a 24 MiB "device" buffer (more than the
// slots hold), each from one source vector refilled right after the write; the model is
// what the buffer must hold once the copies are done.
void random_writes(Staging& st, std::vector<uint8_t>& device, std::vector<uint8_t>& model, int n_writes,
                   std::mt19937& rng) {
  std::vector<uint8_t> src(size_t{3} << 20);
  for (int i = 0; i < n_writes; ++i) {
    const size_t n = i % 4 == 0 ? 1 + rng() % src.size() : 1 + rng() % 9000;
    const size_t at = rng() % (device.size() - n + 1);
    // Cheap to fill (the host must outrun the copies): one byte value per write, and the
    // write's number in its first bytes.
    std::memset(src.data(), static_cast<int>(rng() & 0xFF), n);
    std::memcpy(src.data(), &i, std::min(n, sizeof i));
    REQUIRE(st.write(device.data() + at, src.data(), n, i % 3 != 0).ok());
    std::memcpy(model.data() + at, src.data(), n);
    std::fill(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n), uint8_t{0xEE});
  }
}

}  // namespace

TEST_CASE("CUDA staged writes land as written however they are packed into the pinned slots (fake runtime)") {
  std::mt19937 rng(7);
  std::vector<uint8_t> device(size_t{24} << 20, 0), model(device.size(), 0);
  {
    Staging st;
    REQUIRE(st.init().ok());
    random_writes(st, device, model, 400, rng);
    REQUIRE(st.finish().ok());
    CHECK(device == model);
    CHECK_FALSE(st.other_pending());
    // And again from where the slots stand now.
    random_writes(st, device, model, 100, rng);
  }  // the destructor waits for the copies before freeing the slots
  CHECK(device == model);
}

TEST_CASE("CUDA staged writes: a stream told to wait sees every copy queued before the mark (fake runtime)") {
  std::mt19937 rng(11);
  std::vector<uint8_t> device(size_t{24} << 20, 0), model(device.size(), 0);
  Staging st;
  REQUIRE(st.init().ok());
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&compute, 0) == cudaSuccess);
  for (int round = 0; round < 5; ++round) {
    random_writes(st, device, model, 60, rng);
    CHECK(st.other_pending());  // some writes were not to the KV cache
    REQUIRE(st.mark().ok());
    REQUIRE(st.wait(compute, round % 2 == 0).ok());
    CHECK_FALSE(st.other_pending());
    const std::vector<uint8_t> expect = model;
    bool seen = false;
    compute->push([&] { seen = device == expect; });  // a "pass" after the wait
    cudaStreamSynchronize(compute);
    CHECK(seen);
  }
  cudaStreamDestroy(compute);
}

TEST_CASE(
    "CUDA staged writes without pinned memory are synchronous copies, and a failed copy is an error (fake runtime)") {
  std::mt19937 rng(13);
  std::vector<uint8_t> device(size_t{24} << 20, 0), model(device.size(), 0);
  {
    fake::pinned_fails = true;
    Staging st;
    REQUIRE(st.init().ok());  // logged, not an error
    fake::pinned_fails = false;
    random_writes(st, device, model, 50, rng);
    CHECK(device == model);  // each write completed before returning
  }
  Staging st;
  REQUIRE(st.init().ok());
  fake::copy_fails = true;
  const uint8_t b[4] = {1, 2, 3, 4};
  const Status s = st.write(device.data(), b, sizeof b, true);
  fake::copy_fails = false;
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("cuda: writing to the device: a fake failure"));
}
