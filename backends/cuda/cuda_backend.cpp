// The Backend implementation on CUDA: buffers are plain device allocations, writes go
// through pinned staging on a copy stream (cu_staging.h), reads, copies and passes through
// the compute stream, and execute() turns each Op into a kernel launch (cu_kernels.h).
#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>

#include "backends/cuda/cu_kernels.h"
#include "backends/cuda/cu_staging.h"
#include "backends/graph_check.h"
#include "backends/transfer_check.h"
#include "common/log.h"

namespace hearth::cuda {
namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string version(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The one sentence that says why a machine has no CUDA device.
std::string no_device_reason(cudaError_t e) {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  switch (e) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver is installed, or it is older than this build's CUDA " + version(runtime) + " needs";
    case cudaErrorNoDevice:
      return "the NVIDIA driver reports no CUDA device";
    default:
      return std::string("the CUDA driver failed: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  }
}

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(void* ptr, size_t bytes, BufferKind kind) : ptr_(ptr), bytes_(bytes), kind_(kind) {}
  ~CudaBuffer() override {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  size_t bytes() const override { return bytes_; }
  uint8_t* ptr() const { return static_cast<uint8_t*>(ptr_); }
  BufferKind kind() const { return kind_; }

 private:
  void* ptr_;
  size_t bytes_;
  BufferKind kind_;
};

const char* kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::Weights:
      return "weights";
    case BufferKind::KvCache:
      return "KV cache";
    case BufferKind::Activations:
      return "activations";
  }
  return "?";
}

// Device memory that grows and never shrinks: the graph's ints and attention's scratch.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~Scratch() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  Status reserve(size_t want, const char* what) {
    if (want <= bytes) return {};
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    const size_t n = std::max(want, size_t{1} << 16);
    if (cudaError_t e = cudaMalloc(&ptr, n); e != cudaSuccess) return cuda_error(e, std::string("allocating ") + what);
    bytes = n;
    return {};
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaDeviceInfo& dev, bool graphs, bool tensor_cores)
      : dev_(dev), use_graphs_(graphs), tensor_cores_(tensor_cores) {
    for (DType t : kWeightTypes)
      if (!weight_type_supported(t)) caps_.weight_types.reset(static_cast<size_t>(t));
  }
  ~CudaBackend() override {
    for (auto& [n, exec] : execs_) cudaGraphExecDestroy(exec);
    if (pinned_ints_ != nullptr) cudaFreeHost(pinned_ints_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status init() {
    if (cudaError_t e = cudaSetDevice(dev_.index); e != cudaSuccess) return cuda_error(e, "selecting the device");
    if (Status st = cuda_error(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"); !st)
      return st;
    return staging_.init();
  }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.kind = "cuda";
    d.name = "cuda: " + dev_.name + " (compute " + std::to_string(dev_.cc_major) + "." + std::to_string(dev_.cc_minor) +
             ", " + gib(dev_.memory_bytes) + (tensor_cores_ ? ", matmul on tf32 tensor cores" : "") + ")";
    d.memory_bytes = dev_.memory_bytes;
    return d;
  }

  Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind kind) override {
    bind();
    void* p = nullptr;
    if (bytes > 0) {
      if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free = 0, total = 0;
        cudaMemGetInfo(&free, &total);
        if (e == cudaErrorMemoryAllocation)
          return make_error("cuda: out of device memory: " + std::string(kind_name(kind)) + " buffer of " + gib(bytes) +
                            " requested, " + gib(free) + " free of " + gib(total) + " on " + dev_.name);
        return cuda_error(e, "allocating a " + std::string(kind_name(kind)) + " buffer of " + gib(bytes)).error();
      }
    }
    std::unique_ptr<Buffer> b = std::make_unique<CudaBuffer>(p, bytes, kind);
    return b;
  }

  Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) override {
    Result<std::unique_ptr<Buffer>> buf = alloc(bytes, BufferKind::Weights);
    if (!buf) return buf.error();
    if (Status st = write(**buf, 0, host, bytes); !st) return st.error();
    if (Status st = staging_.finish(); !st) return st.error();
    return buf;
  }

  const DeviceCaps& caps() const override { return caps_; }

  Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    if (Status st = check_range("cuda", "write", &dst, offset, bytes); !st) return st;
    auto* b = dynamic_cast<CudaBuffer*>(&dst);
    if (b == nullptr) return make_error("cuda: write to a buffer of another backend");
    bind();
    return staging_.write(b->ptr() + offset, src, bytes, b->kind() == BufferKind::KvCache);
  }

  Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) override {
    if (Status st = check_range("cuda", "read", &src, offset, bytes); !st) return st;
    const auto* b = dynamic_cast<const CudaBuffer*>(&src);
    if (b == nullptr) return make_error("cuda: read from a buffer of another backend");
    if (bytes == 0) return {};
    bind();
    if (Status st = after_writes(); !st) return st;
    if (Status st = cuda_error(cudaMemcpyAsync(dst, b->ptr() + offset, bytes, cudaMemcpyDeviceToHost, stream_),
                               "reading from the device");
        !st)
      return st;
    return sync("reading from the device");
  }

  Status copy(std::span<const BufferCopy> copies) override {
    for (const BufferCopy& c : copies) {
      if (Status st = check_copy("cuda", c); !st) return st;
      if (dynamic_cast<const CudaBuffer*>(c.src) == nullptr || dynamic_cast<const CudaBuffer*>(c.dst) == nullptr)
        return make_error("cuda: copy between buffers of another backend");
    }
    bind();
    if (Status st = after_writes(); !st) return st;
    for (const BufferCopy& c : copies) {
      if (c.bytes == 0) continue;
      const auto* s = static_cast<const CudaBuffer*>(c.src);
      const auto* d = static_cast<const CudaBuffer*>(c.dst);
      if (Status st = cuda_error(cudaMemcpyAsync(d->ptr() + c.dst_offset, s->ptr() + c.src_offset, c.bytes,
                                                 cudaMemcpyDeviceToDevice, stream_),
                                 "copying on the device");
          !st)
        return st;
    }
    return sync("copying on the device");
  }

  Status execute(const Graph& graph) override;

 private:
  // The current device is a per-thread setting of the runtime, and the backend is made on
  // one thread and used on the engine's: every entry point that touches the device sets it.
  void bind() const { cudaSetDevice(dev_.index); }
  Status sync(const std::string& what) { return cuda_error(cudaStreamSynchronize(stream_), what); }
  // Orders the compute stream after every write queued so far.
  Status after_writes() {
    if (Status st = staging_.mark(); !st) return st;
    return staging_.wait(stream_, false);
  }
  static bool touches_kv(const Op& op);
  Status launch_all(const Graph& graph, bool capturing);
  Status check_device_limits(const Graph& graph) const;
  Status prepare(const Graph& graph);
  void launch(const Op& op, const Graph& graph);
  Status run_as_graph(const Graph& graph);
  const int32_t* ints(IntSpan s) const { return static_cast<const int32_t*>(ints_.ptr) + s.offset; }
  AttentionArgs attention_args(const Op& op, const Graph& graph) const;

  CudaDeviceInfo dev_;
  bool use_graphs_;
  bool tensor_cores_;  // MatMul by launch_matmul_mma
  cudaStream_t stream_ = nullptr;
  DeviceCaps caps_ = DeviceCaps::all();
  Scratch ints_, attn_scratch_, experts_scratch_;  // experts: MatMulExperts' pairs grouped by expert
  int32_t* pinned_ints_ = nullptr;
  size_t pinned_ints_count_ = 0;
  // Instantiated graphs by number of ops: a decode step and a prefill chunk of the same
  // model differ only in launch parameters, which cudaGraphExecUpdate changes in place.
  std::map<size_t, cudaGraphExec_t> execs_;
  Staging staging_;
};

DevRows rows(const Tensor& t) {
  DevRows r;
  r.ptr = static_cast<CudaBuffer*>(t.buffer)->ptr() + t.offset;
  r.ne0 = t.ne0;
  r.rows = t.rows;
  r.stride = t.row_stride;
  return r;
}

AttentionArgs CudaBackend::attention_args(const Op& op, const Graph& graph) const {
  AttentionArgs a;
  a.q = rows(op.src0);
  a.k_cache = rows(op.src2);
  a.v_cache = rows(op.src3);
  a.kv_type = op.src2.type;
  a.positions = ints(op.ia);
  a.slots = ints(op.ib);
  a.n_kv = static_cast<int32_t>(op.ib.count);
  a.n_heads = op.i0;
  a.n_kv_heads = op.i1;
  a.head_dim = op.i2;
  a.window = op.i3;
  a.scale = op.f0;
  a.softcap = op.f1;
  a.dst = rows(op.dst);
  const std::span<const int32_t> pos = graph.get(op.ia);
  if (!pos.empty()) {
    a.max_position = *std::max_element(pos.begin(), pos.end());
    a.min_position = *std::min_element(pos.begin(), pos.end());
  }
  return a;
}

// True for the op kinds launch() has kernels for. A kind added to backend.h without a case
// here is a build warning (an error in this target) and, until then, a refused graph.
bool has_kernels(OpKind kind) {
  switch (kind) {
    case OpKind::GetRows:
    case OpKind::RmsNorm:
    case OpKind::MatMul:
    case OpKind::Rope:
    case OpKind::Add:
    case OpKind::AddRow:
    case OpKind::Scale:
    case OpKind::GeluMul:
    case OpKind::SiluMul:
    case OpKind::Softcap:
    case OpKind::StoreKv:
    case OpKind::Attention:
    case OpKind::CopyRows:
    case OpKind::MoeRoute:
    case OpKind::MatMulExperts:
    case OpKind::MoeCombine:
      return true;
  }
  return false;
}

Status CudaBackend::check_device_limits(const Graph& graph) const {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    if (!has_kernels(op.kind))
      return make_error("cuda: op " + std::to_string(i) + " (" + op_name(op.kind) +
                        ") is not supported by the CUDA backend");
    for (const Tensor* t : {&op.dst, &op.src0, &op.src1, &op.src2, &op.src3})
      if (t->valid() && dynamic_cast<const CudaBuffer*>(t->buffer) == nullptr)
        return make_error("cuda: op " + std::to_string(i) + " (" + op_name(op.kind) +
                          ") names a buffer of another backend");
    if (op.kind == OpKind::Attention && !attention_supported(op.i2, op.src2.type))
      return make_error("cuda: op " + std::to_string(i) + " (Attention): head_dim " + std::to_string(op.i2) + " with " +
                        dtype_name(op.src2.type) + " KV is not supported by the CUDA kernels");
  }
  return {};
}

// Uploads the graph's ints and sizes attention's and MatMulExperts' scratch: everything a pass needs before
// its first launch, so the launches themselves can be captured.
Status CudaBackend::prepare(const Graph& graph) {
  const size_t n = graph.ints.size();
  if (n > pinned_ints_count_) {
    if (pinned_ints_ != nullptr) cudaFreeHost(pinned_ints_);
    pinned_ints_ = nullptr;
    pinned_ints_count_ = 0;
    const size_t want = std::max(n * 2, size_t{4096});
    void* p = nullptr;
    if (Status st = cuda_error(cudaMallocHost(&p, want * sizeof(int32_t)), "allocating pinned host memory"); !st)
      return st;
    pinned_ints_ = static_cast<int32_t*>(p);
    pinned_ints_count_ = want;
  }
  if (Status st = ints_.reserve(std::max<size_t>(n, 1) * sizeof(int32_t), "the graph's integer inputs"); !st) return st;
  if (n > 0) {
    std::memcpy(pinned_ints_, graph.ints.data(), n * sizeof(int32_t));
    if (Status st =
            cuda_error(cudaMemcpyAsync(ints_.ptr, pinned_ints_, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                       "uploading the graph's integer inputs");
        !st)
      return st;
  }
  size_t scratch = 0, experts = 0;
  for (const Op& op : graph.ops) {
    if (op.kind == OpKind::Attention) scratch = std::max(scratch, attention_scratch_bytes(attention_args(op, graph)));
    if (op.kind == OpKind::MatMulExperts)
      experts = std::max(experts, matmul_experts_scratch_bytes(op.src2.rows, op.src2.ne0, op.src0.rows / op.dst.ne0));
  }
  if (Status st = experts_scratch_.reserve(experts, "MatMulExperts' grouping scratch"); !st) return st;
  return attn_scratch_.reserve(scratch, "attention scratch");
}

void CudaBackend::launch(const Op& op, const Graph& graph) {
  switch (op.kind) {
    case OpKind::GetRows:
      launch_get_rows(op.src0.type, rows(op.src0), ints(op.ia), op.ia.count, op.f0, rows(op.dst), stream_);
      break;
    case OpKind::RmsNorm:
      launch_rms_norm(rows(op.src0), static_cast<const float*>(rows(op.src1).ptr), op.src1.ne0, op.f0, rows(op.dst),
                      stream_);
      break;
    case OpKind::MatMul:
      (tensor_cores_ ? launch_matmul_mma : launch_matmul)(op.src0.type, rows(op.src0), rows(op.src1), rows(op.dst),
                                                          stream_);
      break;
    case OpKind::Rope:
      launch_rope(rows(op.dst), ints(op.ia), op.i0, op.i1, op.i2, op.f0, op.f1, stream_);
      break;
    case OpKind::Add:
      launch_binary(Binary::Add, rows(op.src0), rows(op.src1), false, rows(op.dst), stream_);
      break;
    case OpKind::AddRow:
      launch_binary(Binary::Add, rows(op.src0), rows(op.src1), true, rows(op.dst), stream_);
      break;
    case OpKind::GeluMul:
      launch_binary(Binary::GeluMul, rows(op.src0), rows(op.src1), false, rows(op.dst), stream_);
      break;
    case OpKind::SiluMul:
      launch_binary(Binary::SiluMul, rows(op.src0), rows(op.src1), false, rows(op.dst), stream_);
      break;
    case OpKind::Scale:
      launch_unary(Unary::Scale, rows(op.src0), op.f0, rows(op.dst), stream_);
      break;
    case OpKind::Softcap:
      launch_unary(Unary::Softcap, rows(op.src0), op.f0, rows(op.dst), stream_);
      break;
    case OpKind::StoreKv:
      launch_store_kv(rows(op.src0), rows(op.src1), ints(op.ia), op.src2.type, rows(op.src2), rows(op.src3), stream_);
      break;
    case OpKind::Attention:
      launch_attention(attention_args(op, graph), attn_scratch_.ptr, stream_);
      break;
    case OpKind::CopyRows:
      launch_copy_rows(rows(op.src0), ints(op.ia), op.ia.count, rows(op.dst), stream_);
      break;
    case OpKind::MoeRoute:
      launch_moe_route(rows(op.src0), op.i0 != 0, op.f0, rows(op.src1), rows(op.dst), stream_);
      break;
    case OpKind::MatMulExperts:
      // The f32 kernel even when MatMul runs on tensor cores (an opt-in mode): there the
      // experts' outputs are launch_matmul's floats, not launch_matmul_mma's.
      launch_matmul_experts(op.src0.type, rows(op.src0), rows(op.src1), rows(op.src2), op.i1 != 0, experts_scratch_.ptr,
                            rows(op.dst), stream_);
      break;
    case OpKind::MoeCombine:
      launch_moe_combine(rows(op.src0), rows(op.src1), rows(op.dst), stream_);
      break;
  }
}

// Captures the pass's launches and replays them as one CUDA graph: a decode step of a
// small model is hundreds of short kernels, and a graph launches them without the host's
// per-kernel cost. The executable graph of the same op count is updated in place when only
// parameters changed (positions, KV length, batch size), else instantiated anew.
Status CudaBackend::run_as_graph(const Graph& graph) {
  if (Status st = cuda_error(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "starting a capture");
      !st)
    return st;
  const Status launched = launch_all(graph, true);
  cudaGraph_t g = nullptr;
  if (Status st = cuda_error(cudaStreamEndCapture(stream_, &g), "capturing the pass"); !st) return st;
  if (!launched) {
    cudaGraphDestroy(g);
    return launched;
  }
  cudaGraphExec_t& exec = execs_[graph.ops.size()];
  bool ready = false;
  if (exec != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    ready = cudaGraphExecUpdate(exec, g, &info) == cudaSuccess;
    if (!ready) {
      (void)cudaGetLastError();
      cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
  }
  Status st;
  if (!ready) st = cuda_error(cudaGraphInstantiate(&exec, g, 0), "instantiating the pass's graph");
  cudaGraphDestroy(g);
  if (!st) {
    execs_.erase(graph.ops.size());
    return st;
  }
  return cuda_error(cudaGraphLaunch(exec, stream_), "launching the pass's graph");
}

bool CudaBackend::touches_kv(const Op& op) {
  for (const Tensor* t : {&op.dst, &op.src0, &op.src1, &op.src2, &op.src3})
    if (t->valid() && static_cast<const CudaBuffer*>(t->buffer)->kind() == BufferKind::KvCache) return true;
  return false;
}

// The pass's launches, with the wait for queued writes just before the first operation on
// the KV cache (writes between passes are restored chunks): what comes before it, the first
// layer's norms and matrix products, overlaps the copies. The wait is launched in every
// pass, copies or not, so that a captured graph keeps one topology.
Status CudaBackend::launch_all(const Graph& graph, bool capturing) {
  bool waited = false;
  for (const Op& op : graph.ops) {
    if (!waited && touches_kv(op)) {
      waited = true;
      if (Status st = staging_.wait(stream_, capturing); !st) return st;
    }
    launch(op, graph);
  }
  return {};
}

Status CudaBackend::execute(const Graph& graph) {
  if (Status st = check_graph(graph, caps_); !st) return make_error("cuda: " + st.error().message);
  if (Status st = check_device_limits(graph); !st) return st;
  bind();
  // Writes to weights or activations must land before the pass's first operation; those to
  // the KV cache only before its first operation on the KV (launch_all).
  if (Status st = staging_.mark(); !st) return st;
  if (staging_.other_pending())
    if (Status st = staging_.wait(stream_, false); !st) return st;
  if (Status st = prepare(graph); !st) return st;
  if (use_graphs_ && graph.ops.size() > 1) {
    if (Status st = run_as_graph(graph); !st) return st;
  } else {
    if (Status st = launch_all(graph, false); !st) return st;
    if (Status st = cuda_error(cudaGetLastError(), "launching the pass"); !st) return st;
  }
  return sync("running the pass");
}

}  // namespace

Result<std::vector<CudaDeviceInfo>> list_devices() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error("cuda: " + no_device_reason(e));
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::vector<CudaDeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    CudaDeviceInfo d;
    d.index = i;
    d.driver_version = version(driver);
    d.runtime_version = version(runtime);
    cudaDeviceProp p{};
    if (cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) {
      (void)cudaGetLastError();
      d.name = "device " + std::to_string(i);
      d.why_not = std::string("its properties cannot be read: ") + cudaGetErrorString(e);
      out.push_back(d);
      continue;
    }
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.memory_bytes = p.totalGlobalMem;
    d.multiprocessors = p.multiProcessorCount;
    if (cudaSetDevice(i) == cudaSuccess) {
      size_t free = 0, total = 0;
      if (cudaMemGetInfo(&free, &total) == cudaSuccess) d.free_bytes = free;
    }
    (void)cudaGetLastError();
    d.usable = p.major * 10 + p.minor >= 75;
    if (!d.usable)
      d.why_not = "compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor) +
                  " is older than 7.5, the oldest CUDA 13 builds for";
    out.push_back(d);
  }
  return out;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaOptions& options) {
  Result<std::vector<CudaDeviceInfo>> devices = list_devices();
  if (!devices) return devices.error();
  const CudaDeviceInfo* pick = nullptr;
  for (const CudaDeviceInfo& d : *devices) {
    if (options.device >= 0) {
      if (d.index == options.device) pick = &d;
    } else if (d.usable && (pick == nullptr || d.memory_bytes > pick->memory_bytes)) {
      pick = &d;
    }
  }
  if (pick == nullptr) {
    if (options.device >= 0)
      return make_error("cuda: no CUDA device " + std::to_string(options.device) + " (this machine has " +
                        std::to_string(devices->size()) + ")");
    return make_error(devices->empty() ? std::string("cuda: the NVIDIA driver reports no CUDA device")
                                       : "cuda: no CUDA device can run hearth (" + devices->front().name + ": " +
                                             devices->front().why_not + ")");
  }
  if (!pick->usable)
    return make_error("cuda: device " + std::to_string(pick->index) + " " + pick->name + ": " + pick->why_not);
  bool graphs = options.graphs, tensor_cores = options.tensor_cores;
  if (const char* e = std::getenv("HEARTH_CUDA_GRAPHS"); e != nullptr && *e == '0') graphs = false;
  if (const char* e = std::getenv("HEARTH_CUDA_MATMUL"); e != nullptr) {
    if (std::string_view(e) == "mma") tensor_cores = true;
    if (std::string_view(e) == "simt") tensor_cores = false;
  }
  if (tensor_cores && pick->cc_major < 8) {
    LOG_WARN("cuda: tensor-core MatMul needs compute capability 8.0 (device " + std::to_string(pick->index) + " has " +
             std::to_string(pick->cc_major) + "." + std::to_string(pick->cc_minor) + "); using CUDA cores");
    tensor_cores = false;
  }
  auto backend = std::make_unique<CudaBackend>(*pick, graphs, tensor_cores);
  if (Status st = backend->init(); !st) return st.error();
  LOG_INFO("cuda: using device " + std::to_string(pick->index) + " " + pick->name + " (compute " +
           std::to_string(pick->cc_major) + "." + std::to_string(pick->cc_minor) + ", " + gib(pick->memory_bytes) +
           ", driver CUDA " + pick->driver_version + ", graphs " + (graphs ? "on" : "off") + ", matmul " +
           (tensor_cores ? "tf32 tensor cores" : "f32 CUDA cores") + ")");
  std::unique_ptr<Backend> b = std::move(backend);
  return b;
}

}  // namespace hearth::cuda
