#include "backends/vulkan/vk_memory.h"

#include <algorithm>
#include <cstring>

namespace hearth::vulkan {
namespace {

// The first memory type allowed by `bits` with all `required` flags, preferring `preferred`.
int pick_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t bits, VkMemoryPropertyFlags required,
                     VkMemoryPropertyFlags preferred) {
  int fallback = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

std::string bytes_str(VkDeviceSize b) {
  return std::to_string(b) + " bytes";
}

}  // namespace

Result<DeviceBuffer> create_buffer(const Context& ctx, VkDeviceSize bytes, bool host_visible) {
  const Fns& fn = ctx.fn;
  DeviceBuffer b;
  b.bytes = std::max<VkDeviceSize>(16, (bytes + 15) / 16 * 16);
  if (ctx.max_allocation != 0 && b.bytes > ctx.max_allocation)
    return make_error("vulkan: cannot allocate " + bytes_str(bytes) + " in one buffer (device limit " +
                      bytes_str(ctx.max_allocation) + ")");
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = b.bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = fn.vkCreateBuffer(ctx.device, &bi, nullptr, &b.buffer);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot create a buffer of ") + bytes_str(bytes) + " (" + vk_result_name(r) +
                      ")");
  VkMemoryRequirements req;
  fn.vkGetBufferMemoryRequirements(ctx.device, b.buffer, &req);
  const VkMemoryPropertyFlags required =
      host_visible ? VkMemoryPropertyFlags{VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT}
                   : VkMemoryPropertyFlags{0};
  const VkMemoryPropertyFlags preferred = host_visible ? required | VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                                                       : VkMemoryPropertyFlags{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT};
  const int type = pick_memory_type(ctx.memory, req.memoryTypeBits, required, preferred);
  if (type < 0) {
    destroy_buffer(ctx, &b);
    return make_error("vulkan: no suitable memory type for a buffer");
  }
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = static_cast<uint32_t>(type);
  r = fn.vkAllocateMemory(ctx.device, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    destroy_buffer(ctx, &b);
    return make_error("vulkan: out of device memory allocating " + bytes_str(bytes) + " (" + vk_result_name(r) + ")");
  }
  fn.vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0);
  if (host_visible) {
    r = fn.vkMapMemory(ctx.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
    if (r != VK_SUCCESS) {
      destroy_buffer(ctx, &b);
      return make_error(std::string("vulkan: cannot map a staging buffer (") + vk_result_name(r) + ")");
    }
  }
  return b;
}

void destroy_buffer(const Context& ctx, DeviceBuffer* b) {
  if (b->mapped) ctx.fn.vkUnmapMemory(ctx.device, b->memory);
  if (b->buffer) ctx.fn.vkDestroyBuffer(ctx.device, b->buffer, nullptr);
  if (b->memory) ctx.fn.vkFreeMemory(ctx.device, b->memory, nullptr);
  *b = DeviceBuffer{};
}

Submitter::~Submitter() {
  if (fence_) ctx_.fn.vkDestroyFence(ctx_.device, fence_, nullptr);
  if (pool_) ctx_.fn.vkDestroyCommandPool(ctx_.device, pool_, nullptr);
}

Status Submitter::init() {
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = ctx_.queue_family;
  VkResult r = ctx_.fn.vkCreateCommandPool(ctx_.device, &pi, nullptr, &pool_);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot create a command pool (") + vk_result_name(r) + ")");
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  r = ctx_.fn.vkAllocateCommandBuffers(ctx_.device, &ai, &cmd_);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot allocate a command buffer (") + vk_result_name(r) + ")");
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = ctx_.fn.vkCreateFence(ctx_.device, &fi, nullptr, &fence_);
  if (r != VK_SUCCESS) return make_error(std::string("vulkan: cannot create a fence (") + vk_result_name(r) + ")");
  return {};
}

Result<VkCommandBuffer> Submitter::begin() {
  ctx_.fn.vkResetCommandBuffer(cmd_, 0);
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  const VkResult r = ctx_.fn.vkBeginCommandBuffer(cmd_, &bi);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot begin a command buffer (") + vk_result_name(r) + ")");
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  ctx_.fn.vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  return cmd_;
}

Status Submitter::submit_and_wait() {
  VkResult r = ctx_.fn.vkEndCommandBuffer(cmd_);
  if (r != VK_SUCCESS) return make_error(std::string("vulkan: cannot record commands (") + vk_result_name(r) + ")");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  r = ctx_.fn.vkQueueSubmit(ctx_.queue, 1, &si, fence_);
  if (r != VK_SUCCESS) return make_error(std::string("vulkan: queue submission failed (") + vk_result_name(r) + ")");
  r = ctx_.fn.vkWaitForFences(ctx_.device, 1, &fence_, VK_TRUE, UINT64_MAX);
  ctx_.fn.vkResetFences(ctx_.device, 1, &fence_);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: waiting for the device failed (") + vk_result_name(r) + ")");
  return {};
}

Status Transfers::ensure_staging(VkDeviceSize bytes) {
  if (staging_.buffer && staging_.bytes >= bytes) return {};
  destroy_buffer(ctx_, &staging_);
  Result<DeviceBuffer> b = create_buffer(ctx_, bytes, true);
  if (!b) return b.error();
  staging_ = *b;
  return {};
}

Status Transfers::write(VkBuffer dst, VkDeviceSize offset, const void* src, VkDeviceSize bytes) {
  const auto* p = static_cast<const uint8_t*>(src);
  while (bytes > 0) {
    const VkDeviceSize n = std::min(bytes, kMaxStaging);
    if (Status st = ensure_staging(n); !st) return st;
    std::memcpy(staging_.mapped, p, n);
    Result<VkCommandBuffer> cmd = sub_.begin();
    if (!cmd) return cmd.error();
    const VkBufferCopy region{0, offset, n};
    ctx_.fn.vkCmdCopyBuffer(*cmd, staging_.buffer, dst, 1, &region);
    if (Status st = sub_.submit_and_wait(); !st) return st;
    p += n;
    offset += n;
    bytes -= n;
  }
  return {};
}

Status Transfers::read(VkBuffer src, VkDeviceSize offset, void* dst, VkDeviceSize bytes) {
  auto* p = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const VkDeviceSize n = std::min(bytes, kMaxStaging);
    if (Status st = ensure_staging(n); !st) return st;
    Result<VkCommandBuffer> cmd = sub_.begin();
    if (!cmd) return cmd.error();
    const VkBufferCopy region{offset, 0, n};
    ctx_.fn.vkCmdCopyBuffer(*cmd, src, staging_.buffer, 1, &region);
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    ctx_.fn.vkCmdPipelineBarrier(*cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                                 nullptr, 0, nullptr);
    if (Status st = sub_.submit_and_wait(); !st) return st;
    std::memcpy(p, staging_.mapped, n);
    p += n;
    offset += n;
    bytes -= n;
  }
  return {};
}

Status Transfers::copy(std::span<const DeviceCopy> copies) {
  Result<VkCommandBuffer> cmd = sub_.begin();
  if (!cmd) return cmd.error();
  for (const DeviceCopy& c : copies) ctx_.fn.vkCmdCopyBuffer(*cmd, c.src, c.dst, 1, &c.region);
  return sub_.submit_and_wait();
}

}  // namespace hearth::vulkan
