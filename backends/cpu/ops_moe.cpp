// The CPU backend's mixture-of-experts operations (backends/backend.h: MoeRoute,
// MatMulExperts, MoeCombine). Routing and combination run the scalar references of
// moe_ref.h row by row; MatMulExperts groups the batch's (token, rank) rows by expert and
// runs the MatMul kernels (gemm, or gemm_repacked on expert stacks repacked at load) on
// each chosen expert's rows once, for all the rows that chose it.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "backends/cpu/host_buffer.h"
#include "backends/cpu/moe_ref.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"

namespace hearth::cpu {

void op_moe_route(const Op& op, ExecContext& ctx) {
  const int64_t n_expert = op.src0.ne0, k = op.dst.ne0;
  ctx.pool->run([&](int ith, int nth) {
    std::vector<float> probs(static_cast<size_t>(n_expert));
    int64_t b, e;
    split_range(op.src0.rows, ith, nth, &b, &e);
    for (int64_t t = b; t < e; ++t) {
      auto* ids = reinterpret_cast<int32_t*>(tensor_data(op.src1) + static_cast<size_t>(t) * op.src1.row_stride);
      moe_route_row(row_f32(op.src0, t), n_expert, k, op.i0 != 0, op.f0, probs.data(), ids, row_f32(op.dst, t));
    }
  });
}

void op_moe_combine(const Op& op, ExecContext& ctx) {
  const int64_t k = op.src1.ne0, d = op.dst.ne0;
  const int64_t x_stride = static_cast<int64_t>(op.src0.row_stride / sizeof(float));
  ctx.pool->run([&](int ith, int nth) {
    int64_t b, e;
    split_range(op.src1.rows, ith, nth, &b, &e);
    for (int64_t t = b; t < e; ++t)
      moe_combine_row(row_f32(op.src0, t * k), x_stride, row_f32(op.src1, t), k, d, row_f32(op.dst, t));
  });
}

namespace {

// The batch's (token, rank) rows grouped by expert: rows of expert e are
// slot[first[e] .. first[e + 1]), in increasing slot order (slot = t * k + j).
struct ExpertGroups {
  std::vector<int64_t> first;  // [n_expert + 1]
  std::vector<int64_t> slot;   // [n_tok * k]; rows whose id is out of range are left out
};

ExpertGroups group_by_expert(const Tensor& ids, int64_t n_expert) {
  const int64_t n_tok = ids.rows, k = ids.ne0;
  auto id = [&](int64_t s) {
    return reinterpret_cast<const int32_t*>(tensor_data(ids) + static_cast<size_t>(s / k) * ids.row_stride)[s % k];
  };
  ExpertGroups g;
  g.first.assign(static_cast<size_t>(n_expert) + 1, 0);
  for (int64_t s = 0; s < n_tok * k; ++s)
    if (const int32_t e = id(s); e >= 0 && e < n_expert) ++g.first[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < n_expert; ++e) g.first[e + 1] += g.first[e];
  g.slot.resize(static_cast<size_t>(g.first[n_expert]));
  std::vector<int64_t> next(g.first.begin(), g.first.end() - 1);
  for (int64_t s = 0; s < n_tok * k; ++s)
    if (const int32_t e = id(s); e >= 0 && e < n_expert) g.slot[static_cast<size_t>(next[e]++)] = s;
  return g;
}

}  // namespace

void op_matmul_experts(const Op& op, ExecContext& ctx) {
  const Tensor& w = op.src0;
  const Tensor& x = op.src1;
  const int64_t n_in = w.ne0, n_out = op.dst.ne0, n_expert = w.rows / n_out;
  const int64_t n_tok = op.src2.rows, k = op.src2.ne0, n_slots = n_tok * k;
  const bool per_slot = op.i1 != 0;
  const DType act_type = vec_dot_type(w.type);
  const size_t act_stride = row_bytes(act_type, n_in);
  const size_t out_bytes = static_cast<size_t>(n_out) * sizeof(float);

  // Rows whose id is out of range are zeros (the contract); the others are overwritten.
  const ExpertGroups g = group_by_expert(op.src2, n_expert);
  if (static_cast<int64_t>(g.slot.size()) < n_slots)
    for (int64_t s = 0; s < n_slots; ++s) std::memset(row_f32(op.dst, s), 0, out_bytes);

  // Each chosen expert's input rows, quantized to the weights' partner type and gathered in
  // the group's order, so that the kernels see them `act_stride` apart; outputs likewise,
  // scattered to dst afterwards. The quantization of a row is that of MatMul's, so every
  // output is MatMul's float.
  const size_t n_rows = g.slot.size();
  ctx.expert_act.resize(n_rows * act_stride);
  ctx.expert_out.resize(n_rows * static_cast<size_t>(n_out));
  uint8_t* act = ctx.expert_act.data();
  float* out = ctx.expert_out.data();
  ctx.pool->run([&](int ith, int nth) {
    int64_t b, e;
    split_range(static_cast<int64_t>(n_rows), ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = g.slot[i];
      const float* src = row_f32(x, per_slot ? s : s / k);
      uint8_t* dst = act + static_cast<size_t>(i) * act_stride;
      if (act_type == DType::F32)
        std::memcpy(dst, src, act_stride);
      else
        quantize_activations(act_type, src, dst, n_in);
    }
  });

  // Work: (expert, 16-row group of its n_out rows), claimed one at a time; an expert's
  // groups go to whichever thread is free, each computing its rows for all the expert's
  // tokens (so the weights are read once per op). Repacked stacks need n_out in whole groups.
  constexpr int64_t kRowQuantum = kRepackRows;
  const auto* hb = dynamic_cast<const HostBuffer*>(w.buffer);
  const uint8_t* repacked = hb != nullptr && n_out % kRowQuantum == 0 ? hb->repacked(w) : nullptr;
  const int64_t groups_per_expert = (n_out + kRowQuantum - 1) / kRowQuantum;
  std::vector<int64_t> used;  // experts with rows
  for (int64_t e = 0; e < n_expert; ++e)
    if (g.first[e + 1] > g.first[e]) used.push_back(e);
  const int64_t units = static_cast<int64_t>(used.size()) * groups_per_expert;
  std::atomic<int64_t> next{0};
  ctx.pool->run([&](int, int) {
    for (int64_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
      const int64_t e = used[static_cast<size_t>(u / groups_per_expert)];
      const int64_t r0 = (u % groups_per_expert) * kRowQuantum, r1 = std::min(n_out, r0 + kRowQuantum);
      const int64_t first = g.first[e], n = g.first[e + 1] - first;
      const uint8_t* a = act + static_cast<size_t>(first) * act_stride;
      // Expert e's n_out rows as a matrix of their own (row o at index o), so the kernels
      // write Y[t * n_out + o] into the group's outputs.
      float* y = out + static_cast<size_t>(first) * n_out;
      const auto sn_out = static_cast<size_t>(n_out);
      if (repacked != nullptr)
        gemm_repacked(w.type, n_in, repacked + static_cast<size_t>(e) * repacked_bytes(w.type, n_in, n_out), r0, r1, a,
                      act_stride, n, y, sn_out);
      else
        gemm(w.type, n_in, tensor_data(w) + static_cast<size_t>(e * n_out) * w.row_stride, w.row_stride, r0, r1, a,
             act_stride, n, y, sn_out);
    }
  });

  ctx.pool->run([&](int ith, int nth) {
    int64_t b, e;
    split_range(static_cast<int64_t>(n_rows), ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i)
      std::memcpy(row_f32(op.dst, g.slot[i]), out + static_cast<size_t>(i) * n_out, out_bytes);
  });
}

}  // namespace hearth::cpu
