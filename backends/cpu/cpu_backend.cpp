#include "backends/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "backends/cpu/ops.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"
#include "backends/graph_check.h"
#include "backends/transfer_check.h"

namespace hearth::cpu {
namespace {

constexpr size_t kAlignment = 64;  // cache line; also enough for any SIMD load

class HostBuffer final : public Buffer {
 public:
  HostBuffer(void* data, size_t bytes, bool owned) : data_(data), bytes_(bytes), owned_(owned) {}
  ~HostBuffer() override {
    if (owned_) std::free(data_);
  }
  size_t bytes() const override { return bytes_; }
  void* host_data() override { return data_; }
  const void* host_data() const override { return data_; }

 private:
  void* data_;
  size_t bytes_;
  bool owned_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads) : pool_(n_threads) {
    ctx_.pool = &pool_;
    ctx_.thread_scratch.resize(pool_.size());
  }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.kind = "cpu";
    d.name = "cpu (" + std::to_string(pool_.size()) + " threads, " +
             simd_level_name(active_simd_level()) + ")";
    return d;
  }

  Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind) override {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (p == nullptr) return make_error("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    std::unique_ptr<Buffer> b = std::make_unique<HostBuffer>(p, bytes, true);
    return b;
  }

  Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) override {
    // The mapping stays valid while the model is loaded: use it in place.
    std::unique_ptr<Buffer> b = std::make_unique<HostBuffer>(const_cast<void*>(host), bytes, false);
    return b;
  }

  const DeviceCaps& caps() const override { return caps_; }

  Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    if (Status st = check_range("cpu", "write", &dst, offset, bytes); !st) return st;
    if (dst.host_data() == nullptr) return make_error("cpu: write to a buffer of another backend");
    if (bytes > 0) std::memcpy(static_cast<uint8_t*>(dst.host_data()) + offset, src, bytes);
    return {};
  }
  Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) override {
    if (Status st = check_range("cpu", "read", &src, offset, bytes); !st) return st;
    if (src.host_data() == nullptr) return make_error("cpu: read from a buffer of another backend");
    if (bytes > 0) std::memcpy(dst, static_cast<const uint8_t*>(src.host_data()) + offset, bytes);
    return {};
  }
  Status copy(std::span<const BufferCopy> copies) override {
    for (const BufferCopy& c : copies) {
      if (Status st = check_copy("cpu", c); !st) return st;
      if (c.src->host_data() == nullptr || c.dst->host_data() == nullptr)
        return make_error("cpu: copy between buffers of another backend");
    }
    for (const BufferCopy& c : copies)
      if (c.bytes > 0)
        std::memcpy(static_cast<uint8_t*>(c.dst->host_data()) + c.dst_offset,
                    static_cast<const uint8_t*>(c.src->host_data()) + c.src_offset, c.bytes);
    return {};
  }

  Status execute(const Graph& g) override {
    if (Status st = check_graph(g, caps_); !st) return make_error("cpu: " + st.error().message);
    for (const Op& op : g.ops) {
      switch (op.kind) {
        case OpKind::GetRows: op_get_rows(op, g, ctx_); break;
        case OpKind::RmsNorm: op_rms_norm(op, ctx_); break;
        case OpKind::MatMul: op_matmul(op, ctx_); break;
        case OpKind::Rope: op_rope(op, g, ctx_); break;
        case OpKind::Add:
        case OpKind::AddRow:
        case OpKind::Scale:
        case OpKind::GeluMul:
        case OpKind::SiluMul:
        case OpKind::Softcap: op_elementwise(op, ctx_); break;
        case OpKind::StoreKv: op_store_kv(op, g, ctx_); break;
        case OpKind::Attention: op_attention(op, g, ctx_); break;
        case OpKind::CopyRows: op_copy_rows(op, g, ctx_); break;
      }
    }
    return {};
  }

 private:
  ThreadPool pool_;
  ExecContext ctx_;
  DeviceCaps caps_ = DeviceCaps::all();
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  const int n = options.n_threads > 0 ? options.n_threads : physical_core_count();
  return std::make_unique<CpuBackend>(n);
}

}  // namespace hearth::cpu
