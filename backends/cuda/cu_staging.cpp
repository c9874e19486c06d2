#include "backends/cuda/cu_staging.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace hearth::cuda {

Status cuda_error(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  return make_error("cuda: " + what + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

Staging::~Staging() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (Slot& s : slots_) {
    if (s.host != nullptr) cudaFreeHost(s.host);
    if (s.last != nullptr) cudaEventDestroy(s.last);
  }
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status Staging::init() {
  if (Status st = cuda_error(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the copy stream");
      !st)
    return st;
  // Timing off: these events only order work, and such events are the cheapest to record
  // and wait on.
  if (Status st = cuda_error(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "creating an event"); !st)
    return st;
  for (Slot& s : slots_)
    if (Status st = cuda_error(cudaEventCreateWithFlags(&s.last, cudaEventDisableTiming), "creating an event"); !st)
      return st;
  // Recorded once so that every later wait names a recorded event.
  if (Status st = cuda_error(cudaEventRecord(done_, stream_), "recording an event"); !st) return st;
  pinned_ = true;
  for (Slot& s : slots_) {
    void* p = nullptr;
    if (cudaError_t e = cudaMallocHost(&p, kSlotBytes); e != cudaSuccess) {
      LOG_WARN("cuda: no pinned host memory for staging writes (" + std::string(cudaGetErrorString(e)) +
               "); writes to the device are synchronous copies");
      (void)cudaGetLastError();
      pinned_ = false;
      break;
    }
    s.host = static_cast<uint8_t*>(p);
  }
  return {};
}

Status Staging::write(uint8_t* dst, const void* src, size_t bytes, bool kv) {
  if (bytes == 0) return {};
  const auto* from = static_cast<const uint8_t*>(src);
  if (!kv) other_pending_ = true;
  unmarked_ = true;
  if (!pinned_) {
    if (Status st =
            cuda_error(cudaMemcpyAsync(dst, from, bytes, cudaMemcpyHostToDevice, stream_), "writing to the device");
        !st)
      return st;
    return cuda_error(cudaStreamSynchronize(stream_), "writing to the device");
  }
  while (bytes > 0) {
    if (slots_[cur_].used == kSlotBytes) {
      // The slot is full: mark its last copy, and take the next one once its own last copy
      // (a lap ago) has completed.
      if (Status st = cuda_error(cudaEventRecord(slots_[cur_].last, stream_), "recording an event"); !st) return st;
      cur_ = (cur_ + 1) % kSlots;
      if (Status st = cuda_error(cudaEventSynchronize(slots_[cur_].last), "waiting for a staged write"); !st) return st;
      slots_[cur_].used = 0;
    }
    Slot& s = slots_[cur_];
    const size_t n = std::min(bytes, kSlotBytes - s.used);
    std::memcpy(s.host + s.used, from, n);
    if (Status st = cuda_error(cudaMemcpyAsync(dst, s.host + s.used, n, cudaMemcpyHostToDevice, stream_),
                               "writing to the device");
        !st)
      return st;
    s.used += n;
    dst += n;
    from += n;
    bytes -= n;
  }
  return {};
}

Status Staging::mark() {
  if (!unmarked_) return {};
  unmarked_ = false;
  return cuda_error(cudaEventRecord(done_, stream_), "recording an event");
}

Status Staging::wait(cudaStream_t stream, bool external) {
  other_pending_ = false;
  return cuda_error(cudaStreamWaitEvent(stream, done_, external ? cudaEventWaitExternal : cudaEventWaitDefault),
                    "waiting for staged writes");
}

Status Staging::finish() {
  other_pending_ = false;
  return cuda_error(cudaStreamSynchronize(stream_), "writing to the device");
}

}  // namespace hearth::cuda
