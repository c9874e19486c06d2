// The embedded SPIR-V of every shader variant (generated vk_shader_table.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hearth::vulkan {

struct ShaderBlob {
  const char* name;      // shaders/<name>.comp
  int subgroup;          // compiled with USE_SUBGROUP
  int fp16;              // compiled with USE_FP16 (16-bit storage)
  const uint32_t* code;  // SPIR-V words
  size_t bytes;
};

std::span<const ShaderBlob> shader_blobs();

}  // namespace hearth::vulkan
