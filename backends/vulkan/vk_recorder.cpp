#include "backends/vulkan/vk_recorder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hearth::vulkan {
namespace {

bool any_overlap(const std::vector<ByteRange>& pending, const ByteRange* rs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (rs[i].buffer == VK_NULL_HANDLE) continue;
    for (const ByteRange& p : pending)
      if (p.overlaps(rs[i])) return true;
  }
  return false;
}

void append(std::vector<ByteRange>* pending, const ByteRange* rs, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (rs[i].buffer != VK_NULL_HANDLE) pending->push_back(rs[i]);
}

}  // namespace

Recorder::~Recorder() {
  if (pool_) ctx_.fn.vkDestroyDescriptorPool(ctx_.device, pool_, nullptr);
  destroy_buffer(ctx_, &ints_);
}

Status Recorder::ensure_ints(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  if (ints_.buffer && ints_.bytes >= bytes) return {};
  const size_t grown = std::max<size_t>(bytes, 2 * ints_.bytes);
  destroy_buffer(ctx_, &ints_);  // the previous pass has completed
  Result<DeviceBuffer> b = create_buffer(ctx_, grown, true);
  if (!b) return b.error();
  ints_ = *b;
  return {};
}

Status Recorder::ensure_sets(size_t n) {
  if (pool_ && pool_capacity_ >= n) {
    ctx_.fn.vkResetDescriptorPool(ctx_.device, pool_, 0);
  } else {
    if (pool_) ctx_.fn.vkDestroyDescriptorPool(ctx_.device, pool_, nullptr);
    pool_ = VK_NULL_HANDLE;
    pool_capacity_ = std::max<size_t>({n, 2 * pool_capacity_, 64});
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(pool_capacity_ * kBindingCount)};
    VkDescriptorPoolCreateInfo pi{};
    pi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pi.maxSets = static_cast<uint32_t>(pool_capacity_);
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    const VkResult r = ctx_.fn.vkCreateDescriptorPool(ctx_.device, &pi, nullptr, &pool_);
    if (r != VK_SUCCESS) {
      pool_capacity_ = 0;
      return make_error(std::string("vulkan: cannot create a descriptor pool (") + vk_result_name(r) + ")");
    }
  }
  sets_.assign(n, VK_NULL_HANDLE);
  if (n == 0) return {};
  std::vector<VkDescriptorSetLayout> layouts(n, pipelines_.set_layout());
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = static_cast<uint32_t>(n);
  ai.pSetLayouts = layouts.data();
  const VkResult r = ctx_.fn.vkAllocateDescriptorSets(ctx_.device, &ai, sets_.data());
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot allocate descriptor sets (") + vk_result_name(r) + ")");
  return {};
}

Status Recorder::run(const std::vector<Dispatch>& dispatches, const Graph& graph) {
  stats_ = ExecuteStats{};
  if (dispatches.empty()) return {};
  const size_t int_bytes = graph.ints.size() * sizeof(int32_t);
  if (Status st = ensure_ints(int_bytes); !st) return st;
  if (int_bytes > 0) std::memcpy(ints_.mapped, graph.ints.data(), int_bytes);  // visible at submit
  if (Status st = ensure_sets(dispatches.size()); !st) return st;

  // Descriptors: all six bindings of every set are written (unused ones point at ints).
  const VkDescriptorBufferInfo ints_info{ints_.buffer, 0, VK_WHOLE_SIZE};
  std::vector<VkDescriptorBufferInfo> infos(dispatches.size() * kBindingCount);
  std::vector<VkWriteDescriptorSet> writes(dispatches.size());
  for (size_t i = 0; i < dispatches.size(); ++i) {
    VkDescriptorBufferInfo* info = &infos[i * kBindingCount];
    for (uint32_t b = 0; b + 1 < kBindingCount; ++b)
      info[b] = dispatches[i].bind[b].buffer != VK_NULL_HANDLE ? dispatches[i].bind[b] : ints_info;
    info[kBindingCount - 1] = ints_info;
    VkWriteDescriptorSet& w = writes[i];
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstSet = sets_[i];
    w.dstBinding = 0;
    w.descriptorCount = kBindingCount;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = info;
  }
  ctx_.fn.vkUpdateDescriptorSets(ctx_.device, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);

  Result<VkCommandBuffer> cmd_r = sub_.begin();
  if (!cmd_r) return cmd_r.error();
  const VkCommandBuffer cmd = *cmd_r;
  // HEARTH_VK_BARRIER_ALL=1: a barrier before every dispatch (to rule out tracking bugs).
  static const bool barrier_all = [] {
    const char* v = std::getenv("HEARTH_VK_BARRIER_ALL");
    return v != nullptr && v[0] == '1';
  }();
  std::vector<ByteRange> pending_reads, pending_writes;
  VkPipeline bound = VK_NULL_HANDLE;
  for (size_t i = 0; i < dispatches.size(); ++i) {
    const Dispatch& d = dispatches[i];
    const bool hazard = (barrier_all && i > 0) || any_overlap(pending_writes, d.reads, 4) ||
                        any_overlap(pending_writes, d.writes, 2) || any_overlap(pending_reads, d.writes, 2);
    if (hazard) {
      VkMemoryBarrier mb{};
      mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      ctx_.fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                                   1, &mb, 0, nullptr, 0, nullptr);
      pending_reads.clear();
      pending_writes.clear();
      ++stats_.barriers;
    }
    append(&pending_reads, d.reads, 4);
    append(&pending_writes, d.writes, 2);
    if (d.pipeline != bound) {
      ctx_.fn.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipeline);
      bound = d.pipeline;
    }
    ctx_.fn.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_.layout(), 0, 1, &sets_[i], 0,
                                    nullptr);
    ctx_.fn.vkCmdPushConstants(cmd, pipelines_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(PushConstants), &d.pc);
    ctx_.fn.vkCmdDispatch(cmd, d.groups[0], d.groups[1], d.groups[2]);
    ++stats_.dispatches;
  }
  return sub_.submit_and_wait();
}

}  // namespace hearth::vulkan
