// Records a forward pass (a list of dispatches) into one command buffer and runs it.
//
// Barriers: the recorder keeps the byte ranges that dispatches recorded since the last
// barrier read and wrote. Before a dispatch that reads or writes a range an un-barriered
// dispatch wrote (RAW, WAW), or writes a range one read (WAR), it records one global
// compute->compute memory barrier and forgets both lists. Independent ops (e.g. the Q, K
// and V matmuls of a layer) therefore run without barriers between them.
//
// Graph::ints go to a host-visible buffer, bound at binding 5 of every dispatch.
// Internal to backends/vulkan/.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vk_memory.h"
#include "backends/vulkan/vk_pipelines.h"

namespace hearth::vulkan {

struct ByteRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize lo = 0, hi = 0;  // [lo, hi)
  bool overlaps(const ByteRange& o) const { return buffer == o.buffer && lo < o.hi && o.lo < hi; }
};

struct Dispatch {
  VkPipeline pipeline = VK_NULL_HANDLE;
  // Bindings 0..4 (binding 5, the ints, is filled in by the recorder); buffer
  // VK_NULL_HANDLE = unused.
  VkDescriptorBufferInfo bind[kBindingCount - 1]{};
  PushConstants pc;
  uint32_t groups[3] = {1, 1, 1};
  ByteRange reads[4];  // unused entries have buffer VK_NULL_HANDLE
  ByteRange writes[2];
};

struct ExecuteStats {
  uint32_t dispatches = 0;
  uint32_t barriers = 0;  // barriers between dispatches of the last pass
};

class Recorder {
 public:
  Recorder(const Context& ctx, Pipelines& pipelines, Submitter& sub) : ctx_(ctx), pipelines_(pipelines), sub_(sub) {}
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Status run(const std::vector<Dispatch>& dispatches, const Graph& graph);
  const ExecuteStats& last_stats() const { return stats_; }

 private:
  Status ensure_ints(size_t bytes);
  Status ensure_sets(size_t n);

  const Context& ctx_;
  Pipelines& pipelines_;
  Submitter& sub_;
  DeviceBuffer ints_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  size_t pool_capacity_ = 0;
  std::vector<VkDescriptorSet> sets_;
  ExecuteStats stats_;
};

}  // namespace hearth::vulkan
