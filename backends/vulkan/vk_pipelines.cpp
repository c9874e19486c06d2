#include "backends/vulkan/vk_pipelines.h"

#include <cstring>

#include "backends/vulkan/vk_shaders.h"

namespace hearth::vulkan {

Pipelines::~Pipelines() {
  for (auto& [key, p] : pipelines_) ctx_.fn.vkDestroyPipeline(ctx_.device, p, nullptr);
  for (auto& [key, m] : modules_) ctx_.fn.vkDestroyShaderModule(ctx_.device, m, nullptr);
  if (layout_) ctx_.fn.vkDestroyPipelineLayout(ctx_.device, layout_, nullptr);
  if (set_layout_) ctx_.fn.vkDestroyDescriptorSetLayout(ctx_.device, set_layout_, nullptr);
}

Status Pipelines::init() {
  VkDescriptorSetLayoutBinding b[kBindingCount]{};
  for (uint32_t i = 0; i < kBindingCount; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = kBindingCount;
  li.pBindings = b;
  VkResult r = ctx_.fn.vkCreateDescriptorSetLayout(ctx_.device, &li, nullptr, &set_layout_);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot create a descriptor set layout (") + vk_result_name(r) + ")");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(PushConstants)};
  VkPipelineLayoutCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pi.setLayoutCount = 1;
  pi.pSetLayouts = &set_layout_;
  pi.pushConstantRangeCount = 1;
  pi.pPushConstantRanges = &range;
  r = ctx_.fn.vkCreatePipelineLayout(ctx_.device, &pi, nullptr, &layout_);
  if (r != VK_SUCCESS)
    return make_error(std::string("vulkan: cannot create a pipeline layout (") + vk_result_name(r) + ")");
  return {};
}

Result<VkPipeline> Pipelines::get(const std::string& name, uint32_t spec, bool fp16, uint32_t spec1, uint32_t spec2) {
  const int sg = ctx_.use_subgroup ? 1 : 0;
  const int f16 = fp16 && ctx_.use_fp16 ? 1 : 0;
  const std::string variant = name + "/" + std::to_string(sg) + std::to_string(f16);
  const std::string key =
      variant + "/" + std::to_string(spec) + "/" + std::to_string(spec1) + "/" + std::to_string(spec2);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;

  VkShaderModule module = VK_NULL_HANDLE;
  if (auto it = modules_.find(variant); it != modules_.end()) {
    module = it->second;
  } else {
    const ShaderBlob* blob = nullptr;
    for (const ShaderBlob& s : shader_blobs())
      if (name == s.name && s.subgroup == sg && s.fp16 == f16) blob = &s;
    if (blob == nullptr) return make_error("vulkan: no shader " + variant);
    VkShaderModuleCreateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    mi.codeSize = blob->bytes;
    mi.pCode = blob->code;
    const VkResult r = ctx_.fn.vkCreateShaderModule(ctx_.device, &mi, nullptr, &module);
    if (r != VK_SUCCESS)
      return make_error("vulkan: cannot create shader module " + variant + " (" + vk_result_name(r) + ")");
    modules_[variant] = module;
  }

  const uint32_t values[3] = {spec, spec1, spec2};
  const VkSpecializationMapEntry entries[3] = {
      {0, 0, sizeof(uint32_t)}, {1, sizeof(uint32_t), sizeof(uint32_t)}, {2, 2 * sizeof(uint32_t), sizeof(uint32_t)}};
  VkSpecializationInfo si{};
  si.mapEntryCount = 3;
  si.pMapEntries = entries;
  si.dataSize = sizeof(values);
  si.pData = values;
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = layout_;
  VkPipeline p = VK_NULL_HANDLE;
  const VkResult r = ctx_.fn.vkCreateComputePipelines(ctx_.device, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
  if (r != VK_SUCCESS) return make_error("vulkan: cannot create pipeline " + key + " (" + vk_result_name(r) + ")");
  pipelines_[key] = p;
  return p;
}

}  // namespace hearth::vulkan
