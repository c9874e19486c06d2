// The Backend implementation: ties the context, memory, pipelines and recorder together.
#include "backends/vulkan/vulkan_backend.h"

#include <cstring>

#include "backends/graph_check.h"
#include "backends/transfer_check.h"
#include "backends/vulkan/vk_context.h"
#include "backends/vulkan/vk_memory.h"
#include "backends/vulkan/vk_ops.h"
#include "backends/vulkan/vk_pipelines.h"
#include "backends/vulkan/vk_recorder.h"
#include "common/log.h"

namespace hearth::vulkan {
namespace {

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(std::unique_ptr<Context> ctx)
      : ctx_(std::move(ctx)),
        sub_(*ctx_),
        transfers_(*ctx_, sub_),
        pipelines_(*ctx_),
        recorder_(*ctx_, pipelines_, sub_),
        planner_(*ctx_, pipelines_) {}

  Status init() {
    if (Status st = sub_.init(); !st) return st;
    return pipelines_.init();
  }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.kind = "vulkan";
    d.name = "vulkan: " + ctx_->info.name + " (" + ctx_->info.type + ")";
    d.memory_bytes = ctx_->info.device_local_bytes;
    return d;
  }

  Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind kind) override {
    Result<DeviceBuffer> b = create_buffer(*ctx_, bytes, false);
    if (!b) return b.error();
    std::unique_ptr<Buffer> buf = std::make_unique<VulkanBuffer>(ctx_.get(), *b, bytes, kind);
    return buf;
  }

  Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) override {
    Result<std::unique_ptr<Buffer>> buf = alloc(bytes, BufferKind::Weights);
    if (!buf) return buf.error();
    const auto* vb = static_cast<VulkanBuffer*>(buf->get());
    if (Status st = transfers_.write(vb->handle(), 0, host, bytes); !st) return st.error();
    return buf;
  }

  const DeviceCaps& caps() const override { return caps_; }

  Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    if (Status st = check_range("vulkan", "write", &dst, offset, bytes); !st) return st;
    auto* vb = dynamic_cast<VulkanBuffer*>(&dst);
    if (vb == nullptr) return make_error("vulkan: write to a buffer of another backend");
    if (bytes == 0) return {};
    return transfers_.write(vb->handle(), offset, src, bytes);
  }

  Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) override {
    if (Status st = check_range("vulkan", "read", &src, offset, bytes); !st) return st;
    const auto* vb = dynamic_cast<const VulkanBuffer*>(&src);
    if (vb == nullptr) return make_error("vulkan: read from a buffer of another backend");
    if (bytes == 0) return {};
    return transfers_.read(vb->handle(), offset, dst, bytes);
  }

  Status copy(std::span<const BufferCopy> copies) override {
    regions_.clear();
    for (const BufferCopy& c : copies) {
      if (Status st = check_copy("vulkan", c); !st) return st;
      const auto* s = dynamic_cast<const VulkanBuffer*>(c.src);
      const auto* d = dynamic_cast<const VulkanBuffer*>(c.dst);
      if (s == nullptr || d == nullptr) return make_error("vulkan: copy between buffers of another backend");
      if (c.bytes > 0)
        regions_.push_back({s->handle(), d->handle(), VkBufferCopy{c.src_offset, c.dst_offset, c.bytes}});
    }
    if (regions_.empty()) return {};
    return transfers_.copy(regions_);
  }

  Status execute(const Graph& graph) override {
    if (Status st = check_graph(graph, caps_); !st) return make_error("vulkan: " + st.error().message);
    dispatches_.clear();
    if (Status st = planner_.prepare(graph); !st) return st;
    for (const Op& op : graph.ops)
      if (Status st = planner_.plan(op, graph, &dispatches_); !st) return st;
    Status st = recorder_.run(dispatches_, graph);
    if (st && log_level() <= LogLevel::Debug) {
      const ExecuteStats& s = recorder_.last_stats();
      LOG_DEBUG("vulkan: pass of " + std::to_string(graph.ops.size()) + " ops, " + std::to_string(s.dispatches) +
                " dispatches, " + std::to_string(s.barriers) + " barriers");
    }
    return st;
  }

 private:
  std::unique_ptr<Context> ctx_;  // first: destroyed last
  Submitter sub_;
  Transfers transfers_;
  Pipelines pipelines_;
  Recorder recorder_;
  OpPlanner planner_;
  std::vector<Dispatch> dispatches_;
  std::vector<DeviceCopy> regions_;
  DeviceCaps caps_ = DeviceCaps::all();  // a shader for every weight type, F16 and F32 KV
};

}  // namespace

Result<std::unique_ptr<Backend>> make_vulkan_backend(const VulkanOptions& options) {
  Result<std::unique_ptr<Context>> ctx = create_context(options);
  if (!ctx) return ctx.error();
  const VulkanDeviceInfo& d = (*ctx)->info;
  LOG_INFO("vulkan: using " + d.name + " (" + d.type + ", " + d.driver + "; fp16 storage " +
           (d.fp16_storage ? "yes" : "no") + ", subgroup " + std::to_string(d.subgroup_size) + ")");
  auto backend = std::make_unique<VulkanBackend>(std::move(*ctx));
  if (Status st = backend->init(); !st) return st.error();
  std::unique_ptr<Backend> b = std::move(backend);
  return b;
}

}  // namespace hearth::vulkan
