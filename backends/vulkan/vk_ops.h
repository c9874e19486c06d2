// Turns each Op of a Graph into dispatches (pipeline, bindings, push constants, grid and
// the byte ranges it reads and writes). Internal to backends/vulkan/.
#pragma once

#include <vector>

#include "backends/vulkan/vk_recorder.h"

namespace hearth::vulkan {

class OpPlanner {
 public:
  OpPlanner(const Context& ctx, Pipelines& pipelines) : ctx_(ctx), pipelines_(pipelines) {}
  ~OpPlanner() {
    destroy_buffer(ctx_, &scratch_);
    destroy_buffer(ctx_, &groups_);
  }
  OpPlanner(const OpPlanner&) = delete;
  OpPlanner& operator=(const OpPlanner&) = delete;
  // Before planning a graph: sizes the scratch buffers split attention and the grouping of
  // MatMulExperts' pairs by expert need.
  Status prepare(const Graph& graph);
  // Appends the dispatches of `op` to `out` (several when a tensor is larger than the
  // device's storage-buffer range and the op can be split by rows).
  Status plan(const Op& op, const Graph& graph, std::vector<Dispatch>* out);

  // Rows of a tensor as one shader binding sees them (vk_ops.cpp).
  struct View;

 private:
  Result<View> view(const Tensor& t, int64_t r0, int64_t r1, size_t unit) const;
  int64_t rows_per_window(const Tensor& t) const;
  Status get_rows(const Op& op, std::vector<Dispatch>* out);
  Status rms_norm(const Op& op, std::vector<Dispatch>* out);
  Status matmul(const Op& op, std::vector<Dispatch>* out);
  Status rope(const Op& op, std::vector<Dispatch>* out);
  Status elementwise(const Op& op, std::vector<Dispatch>* out);
  Status store_kv(const Op& op, std::vector<Dispatch>* out);
  Status attention(const Op& op, std::vector<Dispatch>* out);
  Status copy_rows(const Op& op, std::vector<Dispatch>* out);
  Status moe_route(const Op& op, std::vector<Dispatch>* out);
  Status matmul_experts(const Op& op, std::vector<Dispatch>* out);
  Status moe_combine(const Op& op, std::vector<Dispatch>* out);
  // Lanes per output row of the MatMul shader for rows of n_in elements.
  uint32_t matmul_lanes(int64_t n_in) const;
  // How many workgroups share one (query row, head) of an Attention op (1: no split).
  uint32_t attention_splits(const Op& op) const;
  static size_t split_scratch_bytes(const Op& op, uint32_t splits);
  // Bytes of moe_group.comp's output for a MatMulExperts op run in tiles (0: one pair per
  // workgroup, no grouping).
  static size_t group_bytes(const Op& op);

  const Context& ctx_;
  Pipelines& pipelines_;
  DeviceBuffer scratch_;  // split attention partials (device-local)
  DeviceBuffer groups_;   // MatMulExperts' pairs grouped by expert (device-local)
};

}  // namespace hearth::vulkan
