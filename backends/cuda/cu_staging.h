// Host-to-device writes through pinned staging memory on a copy stream of their own.
//
// Backend::write returns once the bytes are in pinned memory and their copy is queued: a
// restore of cached chunks (dozens of small writes per chunk, one per layer, K and V) costs
// the engine thread a memcpy each instead of a synchronous round trip through pageable
// memory, and the copies run while it goes on placing chunks and recording the next pass.
// The pass waits for them on the device (CudaBackend::execute), just before its first
// operation that touches the KV cache when only the KV cache was written, so the layers'
// first matrix products overlap the copies too.
//
// The staging memory is kSlots slots of kSlotBytes; writes fill a slot in order, small ones
// packed together, a large one (weights) split over as many slots as it takes. A slot is
// reused once its last copy has completed (an event per slot), which is also what bounds
// how far the host runs ahead of the copies.
//
// Thread-safety: as the Backend, one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace hearth::cuda {

// "cuda: <what>: <the runtime's sentence> (<error name>)"; success for cudaSuccess.
Status cuda_error(cudaError_t e, const std::string& what);

class Staging {
 public:
  static constexpr size_t kSlots = 8;
  static constexpr size_t kSlotBytes = size_t{2} << 20;  // 16 MiB pinned in all

  Staging() = default;
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Creates the copy stream and the events, and pins the slots. Without pinned memory (a
  // locked-memory limit, say) writes fall back to synchronous copies from the caller's
  // memory, logged once; only a failure to create the stream or events is an error.
  Status init();

  // Copies `bytes` from host `src` to device `dst`: staged, queued on the copy stream,
  // and returned before the copy completes (src may be reused at once). `kv`: dst lies in
  // a KV cache buffer (see other_pending). An error means the destination holds an unknown mix.
  Status write(uint8_t* dst, const void* src, size_t bytes, bool kv);

  // Records that the copies queued so far are the ones the next wait covers. Called before
  // a pass (and before its capture: nothing is recorded while a stream captures).
  Status mark();
  // Makes `stream` wait on the device for the copies queued before the last mark (an event
  // wait, no host synchronisation). `external`: the wait is being captured into a CUDA
  // graph, whose replays then wait for the copies marked before each replay's launch.
  Status wait(cudaStream_t stream, bool external);
  // Whether copies to a buffer other than the KV cache were queued since the last wait: a
  // pass must then wait before its first operation, not only before its first on the KV.
  bool other_pending() const { return other_pending_; }

  // Blocks the host until every queued copy has completed, and reports an error a copy
  // met on the device.
  Status finish();

 private:
  struct Slot {
    uint8_t* host = nullptr;     // pinned, kSlotBytes
    size_t used = 0;             // bytes handed out since the slot was last reused
    cudaEvent_t last = nullptr;  // recorded after the slot's last copy, when it filled up
  };
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;  // recorded by mark(), after the copies queued before it
  bool unmarked_ = false;       // copies were queued since the last mark
  std::array<Slot, kSlots> slots_{};
  size_t cur_ = 0;
  bool pinned_ = false;
  bool other_pending_ = false;
};

}  // namespace hearth::cuda
