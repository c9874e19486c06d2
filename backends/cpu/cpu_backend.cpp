#include "backends/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "backends/cpu/host_buffer.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"
#include "backends/graph_check.h"
#include "backends/transfer_check.h"

namespace hearth::cpu {
namespace {

constexpr size_t kAlignment = 64;  // cache line; also enough for any SIMD load
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads) : pool_(n_threads) {
    ctx_.pool = &pool_;
    ctx_.thread_scratch.resize(pool_.size());
  }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.kind = "cpu";
    d.name = "cpu (" + std::to_string(pool_.size()) + " threads, " + simd_level_name(active_simd_level()) + ")";
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

  // Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K weights that MatMul reads go to the row-interleaved
  // layouts of repack.h when this CPU's kernels have them (repack_useful): same values,
  // same results, the transposition done once here instead of at every use (GetRows takes
  // a row back out).
  // The copy replaces the mapping's pages (released when host_droppable), so the weights
  // are not held twice.
  Status prepare_matmul_weights(std::span<const Tensor> weights, bool host_droppable) override {
    struct Job {
      const Tensor* t;
      HostBuffer* hb;
      size_t span;  // bytes of the view in the buffer
      uint8_t* dst = nullptr;
    };
    std::vector<Job> jobs;
    std::vector<std::pair<HostBuffer*, size_t>> arena_bytes;  // per buffer, in order of first use
    for (const Tensor& t : weights) {
      auto* hb = dynamic_cast<HostBuffer*>(t.buffer);
      if (hb == nullptr || hb->repacked(t) != nullptr) continue;
      if (!repack_useful(t.type, active_simd_level(), t.ne0, t.rows)) continue;
      const size_t span = static_cast<size_t>(t.rows - 1) * t.row_stride + t.row_size();
      if (t.offset > hb->bytes() || span > hb->bytes() - t.offset)
        return make_error("cpu: a weight view lies outside its buffer");
      jobs.push_back({&t, hb, span});
      auto a = std::ranges::find(arena_bytes, hb, &std::pair<HostBuffer*, size_t>::first);
      if (a == arena_bytes.end()) arena_bytes.emplace_back(hb, 0);
    }
    // Each buffer's copies share one arena in 2 MiB huge pages where the kernel gives them
    // (MADV_HUGEPAGE before the first touch): decode streams every weight once a token, and
    // with 4 KiB pages that is a TLB miss every 64 cache lines.
    for (auto& [hb, bytes] : arena_bytes) {
      for (const Job& j : jobs)
        if (j.hb == hb) bytes += round_up(repacked_bytes(j.t->type, j.t->ne0, j.t->rows), kAlignment);
      const size_t n = round_up(bytes, kHugePage);
      HostBuffer::Bytes arena(static_cast<uint8_t*>(std::aligned_alloc(kHugePage, n)));
      if (arena == nullptr) return make_error("cpu: out of memory repacking weights (" + std::to_string(n) + " bytes)");
      ::madvise(arena.get(), n, MADV_HUGEPAGE);  // advice: where the kernel says no, 4 KiB pages
      uint8_t* next = arena.get();
      for (Job& j : jobs) {
        if (j.hb != hb) continue;
        j.dst = next;
        next += round_up(repacked_bytes(j.t->type, j.t->ne0, j.t->rows), kAlignment);
      }
      hb->adopt(std::move(arena));
    }
    // The copies in slices of whole 16-row groups of about kSliceBytes, dealt to every
    // thread, each slice's mapping pages released as soon as it is copied: a big tensor (a
    // 178 MB embedding table) is copied in parallel, and the two copies coexist a few
    // slices at a time, not a tensor at a time.
    constexpr size_t kSliceBytes = size_t{1} << 20;
    struct Slice {
      const Job* job;
      int64_t r0, r1;
    };
    std::vector<Slice> slices;
    for (const Job& j : jobs) {
      const int64_t step = std::max<int64_t>(
          kRepackRows, static_cast<int64_t>(kSliceBytes / j.t->row_stride) / kRepackRows * kRepackRows);
      for (int64_t r = 0; r < j.t->rows; r += step) slices.push_back({&j, r, std::min(j.t->rows, r + step)});
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    // Whole pages inside [p, p + n) only: the neighbours may share the edge pages.
    auto release = [&](const uint8_t* p, size_t n) {
      const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
      const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
      if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    };
    auto view_data = [](const Job& j) { return static_cast<const uint8_t*>(j.hb->host_data()) + j.t->offset; };
    pool_.run([&](int task, int n_tasks) {
      for (size_t i = static_cast<size_t>(task); i < slices.size(); i += static_cast<size_t>(n_tasks)) {
        const Slice& s = slices[i];
        const Tensor& t = *s.job->t;
        const uint8_t* src = view_data(*s.job) + static_cast<size_t>(s.r0) * t.row_stride;
        repack_rows(t.type, t.ne0, src, t.row_stride, s.r1 - s.r0, s.job->dst + repacked_bytes(t.type, t.ne0, s.r0));
        if (host_droppable) release(src, static_cast<size_t>(s.r1 - s.r0) * t.row_stride);
      }
    });
    // The pages the slices' edges shared.
    if (host_droppable)
      for (const Job& j : jobs) release(view_data(j), j.span);
    for (const Job& j : jobs) j.hb->add_repacked(*j.t, j.dst);
    return {};
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
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      switch (op.kind) {
        case OpKind::GetRows:
          op_get_rows(op, g, ctx_);
          break;
        case OpKind::RmsNorm:
          op_rms_norm(op, ctx_);
          break;
        case OpKind::MatMul: {
          const size_t end = matmul_group_end(g.ops, i);
          op_matmuls(std::span<const Op>(g.ops).subspan(i, end - i), ctx_);
          i = end - 1;
          break;
        }
        case OpKind::Rope:
          op_rope(op, g, ctx_);
          break;
        case OpKind::Add:
        case OpKind::AddRow:
        case OpKind::Scale:
        case OpKind::GeluMul:
        case OpKind::SiluMul:
        case OpKind::Softcap:
          op_elementwise(op, ctx_);
          break;
        case OpKind::StoreKv:
          op_store_kv(op, g, ctx_);
          break;
        case OpKind::Attention:
          op_attention(op, g, ctx_);
          break;
        case OpKind::CopyRows:
          op_copy_rows(op, g, ctx_);
          break;
        case OpKind::MoeRoute:
          op_moe_route(op, ctx_);
          break;
        case OpKind::MatMulExperts:
          op_matmul_experts(op, ctx_);
          break;
        case OpKind::MoeCombine:
          op_moe_combine(op, ctx_);
          break;
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
