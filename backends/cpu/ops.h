// CPU implementations of the backend operations (see backends/backend.h for the
// contract of each). Internal to backends/cpu.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/thread_pool.h"

namespace hearth::cpu {

// What an op needs besides its operands: the pool and reusable scratch memory.
struct ExecContext {
  ThreadPool* pool = nullptr;
  std::vector<uint8_t> scratch;                    // activation quantization, KV staging
  std::vector<std::vector<float>> thread_scratch;  // one per thread (attention scores)
  std::vector<uint8_t> expert_act;                 // MatMulExperts: its rows' activations, by expert
  std::vector<float> expert_out;                   // MatMulExperts: their outputs, by expert

  uint8_t* scratch_bytes(size_t n) {
    if (scratch.size() < n) scratch.resize(n);
    return scratch.data();
  }
};

// Row r of a KV cache tensor (F16 or F32) as f32 / from f32.
void load_row_f32(const Tensor& t, int64_t r, float* dst);
void store_row_f32(const Tensor& t, int64_t r, const float* src);

inline uint8_t* tensor_data(const Tensor& t) {
  return static_cast<uint8_t*>(t.buffer->host_data()) + t.offset;
}
inline float* row_f32(const Tensor& t, int64_t r) {
  return reinterpret_cast<float*>(tensor_data(t) + static_cast<size_t>(r) * t.row_stride);
}

// Splits [0, n) into nth near-equal ranges; returns thread ith's [begin, end).
inline void split_range(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = (n + nth - 1) / nth;
  *begin = std::min<int64_t>(n, per * ith);
  *end = std::min<int64_t>(n, *begin + per);
}

// fn(task, n_tasks) as a pool job, or as the one task (0, 1) on the calling thread when the
// op splits only n_units <= 1 units (a decode step's one row): the split hands that unit
// to one task either way, so a job would add only its synchronisation, a few microseconds
// at 2 threads, some 250 times a Gemma 3 step. Each unit's arithmetic is the same.
inline void run_split(ExecContext& ctx, int64_t n_units, const std::function<void(int, int)>& fn) {
  if (n_units <= 1) {
    fn(0, 1);
  } else {
    ctx.pool->run(fn);
  }
}

void op_get_rows(const Op& op, const Graph& g, ExecContext& ctx);
void op_rms_norm(const Op& op, ExecContext& ctx);
// MatMuls that read the same input, as one job (the input quantized once): ops[first,
// matmul_group_end(ops, first)) are consecutive MatMuls with the same src1 and activation
// type, none writing over the input or another's output. Each output is as its op alone
// gives it (one op is a group of one).
size_t matmul_group_end(std::span<const Op> ops, size_t first);
void op_matmuls(std::span<const Op> ops, ExecContext& ctx);
void op_rope(const Op& op, const Graph& g, ExecContext& ctx);
void op_elementwise(const Op& op, ExecContext& ctx);  // Add, AddRow, Scale, GeluMul, SiluMul, Softcap
void op_store_kv(const Op& op, const Graph& g, ExecContext& ctx);
void op_attention(const Op& op, const Graph& g, ExecContext& ctx);

// How op_attention splits its work among tasks (see ops_attention.cpp); both give the same
// bits. RowTiles is the default; PerRow, the former schedule, stays for tests and
// benchmarks to compare with, and is the initial value when $HEARTH_ATTN_SCHEDULE is "rows".
// Returns the previous schedule; meant for start-up and tests (it is atomic, but an op
// running concurrently may use either).
enum class AttnSchedule { RowTiles, PerRow };
AttnSchedule set_attn_schedule(AttnSchedule s);
void op_copy_rows(const Op& op, const Graph& g, ExecContext& ctx);
void op_moe_route(const Op& op, ExecContext& ctx);
void op_matmul_experts(const Op& op, ExecContext& ctx);
void op_moe_combine(const Op& op, ExecContext& ctx);

}  // namespace hearth::cpu
