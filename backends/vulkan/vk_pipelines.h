// Compute pipelines built lazily from the embedded SPIR-V: one descriptor set layout (six
// storage buffers: dst, src0..src3, Graph::ints) and one push-constant block shared by
// every shader, so one pipeline layout serves all. Internal to backends/vulkan/.
#pragma once

#include <map>
#include <string>

#include "backends/vulkan/vk_context.h"

namespace hearth::vulkan {

constexpr uint32_t kBindingCount = 6;  // 0 dst, 1 src0, 2 src1, 3 src2, 4 src3, 5 ints

// Mirrors the push-constant block of shaders/common.glsl.
struct PushConstants {
  uint32_t d_off = 0, s0_off = 0, s1_off = 0, s2_off = 0, s3_off = 0;
  uint32_t d_stride = 0, s0_stride = 0, s1_stride = 0, s2_stride = 0, s3_stride = 0;
  uint32_t ne0 = 0, rows = 0;
  uint32_t ia_off = 0, ib_off = 0, n_ia = 0, n_ib = 0;
  int32_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  float f0 = 0.0f, f1 = 0.0f;
  uint32_t u0 = 0, u1 = 0;
};
static_assert(sizeof(PushConstants) == 96);

class Pipelines {
 public:
  explicit Pipelines(const Context& ctx) : ctx_(ctx) {}
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  Status init();
  // The pipeline of shaders/<name>.comp with specialization constants 0 = spec (a DType
  // id), 1 = spec1 and 2 = spec2, in the device's subgroup variant and, when fp16 and the device has
  // 16-bit storage, the USE_FP16 variant.
  Result<VkPipeline> get(const std::string& name, uint32_t spec, bool fp16, uint32_t spec1 = 0, uint32_t spec2 = 0);
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  const Context& ctx_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::string, VkPipeline> pipelines_;
};

}  // namespace hearth::vulkan
