// Device buffers, host-visible staging, and the one command buffer + fence every transfer
// and every forward pass is submitted through. Internal to backends/vulkan/.
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/vk_context.h"

namespace hearth::vulkan {

struct DeviceBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize bytes = 0;
  void* mapped = nullptr;  // host address when created host-visible (persistently mapped)
};

// A storage + transfer buffer of at least `bytes` bytes: device-local memory, or
// host-visible coherent (mapped) memory when host_visible.
Result<DeviceBuffer> create_buffer(const Context& ctx, VkDeviceSize bytes, bool host_visible);
void destroy_buffer(const Context& ctx, DeviceBuffer* b);

// A Backend buffer: device memory the host reaches only through write/read.
class VulkanBuffer final : public Buffer {
 public:
  VulkanBuffer(const Context* ctx, DeviceBuffer b, size_t bytes, BufferKind kind)
      : ctx_(ctx), b_(b), bytes_(bytes), kind_(kind) {}
  ~VulkanBuffer() override { destroy_buffer(*ctx_, &b_); }
  size_t bytes() const override { return bytes_; }
  VkBuffer handle() const { return b_.buffer; }
  VkDeviceSize allocated() const { return b_.bytes; }
  BufferKind kind() const { return kind_; }

 private:
  const Context* ctx_;
  DeviceBuffer b_;
  size_t bytes_;
  BufferKind kind_;
};

// One primary command buffer, re-recorded per submission, and its fence. Every command
// buffer starts with a global barrier ordering it after all earlier submissions' shader and
// transfer writes (the fence wait alone does not make device writes visible to the device).
class Submitter {
 public:
  explicit Submitter(const Context& ctx) : ctx_(ctx) {}
  ~Submitter();
  Status init();
  Result<VkCommandBuffer> begin();
  Status submit_and_wait();

 private:
  const Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// One device-side copy region between two buffers.
struct DeviceCopy {
  VkBuffer src = VK_NULL_HANDLE;
  VkBuffer dst = VK_NULL_HANDLE;
  VkBufferCopy region{};
};

// Host <-> device copies through a host-visible staging buffer (grown on demand, copies
// larger than kMaxStaging go in pieces); each call completes before it returns.
class Transfers {
 public:
  static constexpr VkDeviceSize kMaxStaging = 64ull << 20;
  Transfers(const Context& ctx, Submitter& sub) : ctx_(ctx), sub_(sub) {}
  ~Transfers() { destroy_buffer(ctx_, &staging_); }
  Status write(VkBuffer dst, VkDeviceSize offset, const void* src, VkDeviceSize bytes);
  Status read(VkBuffer src, VkDeviceSize offset, void* dst, VkDeviceSize bytes);
  // Device-side copies in one submission.
  Status copy(std::span<const DeviceCopy> copies);

 private:
  Status ensure_staging(VkDeviceSize bytes);
  const Context& ctx_;
  Submitter& sub_;
  DeviceBuffer staging_;
};

}  // namespace hearth::vulkan
