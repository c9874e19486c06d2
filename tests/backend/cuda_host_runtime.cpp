// A CUDA runtime for the CUDA backend run on the host (backend_cuda_on_host_tests): one
// device, "hearth host emulation", compute capability 9.0, 8 GiB whose allocations are host
// memory (256-byte aligned, counted, out of memory past 8 GiB). Everything completes at
// once: copies are memcpy, streams and events order nothing that is not already done, and a
// pass's kernels run as they are launched (cuda_on_host.h), during a stream capture too, so
// a captured graph's launch has nothing left to do. What it exercises is the backend's own
// code: buffers, transfers and their checks, the staging, the graph capture and update
// calls, the integer upload, the attention scratch; not the GPU's concurrency.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

struct CUstream_st {
  int unused = 0;
};
struct CUevent_st {
  int unused = 0;
};
struct CUgraph_st {
  int unused = 0;
};
struct CUgraphExec_st {
  int unused = 0;
};

namespace {

constexpr size_t kTotal = size_t{8} << 30;

struct Memory {
  std::mutex mu;
  std::map<void*, size_t> live;
  size_t used = 0;
};

Memory& memory() {
  static Memory m;
  return m;
}

}  // namespace

extern "C" {

cudaError_t cudaGetLastError(void) {
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation" : "cudaError";
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : e == cudaErrorMemoryAllocation ? "out of memory" : "an emulated failure";
}
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "hearth host emulation");
  p->major = 9;
  p->minor = 0;
  p->totalGlobalMem = kTotal;
  p->multiProcessorCount = 4;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::mutex> lock(memory().mu);
  *total = kTotal;
  *free = kTotal - memory().used;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t n) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  const size_t rounded = (n + 255) / 256 * 256;
  if (rounded > kTotal - m.used) return cudaErrorMemoryAllocation;
  *p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  m.live[*p] = rounded;
  m.used += rounded;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  const auto it = m.live.find(p);
  if (it == m.live.end()) return cudaErrorInvalidValue;
  m.used -= it->second;
  m.live.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  *p = std::malloc(n == 0 ? 1 : n);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind, cudaStream_t) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
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
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = new CUgraph_st;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t, unsigned long long) {
  *exec = new CUgraphExec_st;
  return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t, cudaGraph_t, cudaGraphExecUpdateResultInfo*) {
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

}  // extern "C"
