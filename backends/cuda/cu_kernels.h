// The CUDA kernels of the backend, as host functions that launch them on a stream. Internal
// to backends/cuda/: cuda_backend.cpp resolves every Tensor to a device address and a row
// stride and calls these; the .cu files implement them. Strides are in bytes; pointers are
// device addresses (byte 0 of row 0 of the view). Integer inputs (token ids, positions, KV
// slots) are device pointers into the graph's ints, uploaded once per execute.
//
// A launcher never synchronises and never allocates: the backend checks errors after the
// pass (cudaGetLastError, then the stream), and gives the scratch memory it needs
// (attention_scratch_bytes) before the pass, so a whole pass can be captured as a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

// HEARTH_LAUNCH(grid, block, stream, kernel)(args...) is kernel<<<grid, block, 0,
// stream>>>(args...): the kernel files launch through it so that
// tests/backend/cuda_on_host.h, which defines it first, can run their kernels on the host.
#ifndef HEARTH_LAUNCH
#define HEARTH_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<grid, block, 0, stream>>>
#endif

namespace hearth::cuda {

// A 2-D view in device memory: `rows` rows of `ne0` elements, consecutive rows `stride`
// bytes apart.
struct DevRows {
  void* ptr = nullptr;
  int64_t ne0 = 0;
  int64_t rows = 0;
  size_t stride = 0;
};

// --- cu_matmul.cu -------------------------------------------------------------------------
// True when launch_matmul / launch_get_rows handle weights of `type`.
bool weight_type_supported(DType type);

// dst[t, o] = sum_i W[o, i] * x[t, i]: w [n_out = w.rows, n_in = w.ne0] of `type`; x F32
// [n_tok, n_in]; dst F32 [n_tok, n_out]. f32 accumulation with the weights dequantized in
// registers; each output's reduction order depends only on n_in (never on n_tok), so a
// token's result is the same whether it runs alone or in a batch.
void launch_matmul(DType type, const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream);

// MatMulExperts (backend.h): w [n_expert * n_out, n_in] stacked experts (n_out = dst.ne0);
// ids I32 [n_tok, k]; x F32 [n_tok or n_tok * k (per_pair), n_in]; dst F32 [n_tok * k,
// n_out]. Each output row is launch_matmul's float for its expert's slice and its input row
// (the same kernel); an id outside [0, n_expert) gives a row of zeros. One token: a pair per
// warp row. Batches, given scratch of matmul_experts_scratch_bytes: the pairs sorted by
// expert first, then tiles of up to 8 pairs of one expert, so an expert's rows are read
// once per 8 of its pairs.
size_t matmul_experts_scratch_bytes(int64_t n_tok, int64_t k, int64_t n_expert);
void launch_matmul_experts(DType type, const DevRows& w, const DevRows& x, const DevRows& ids, bool per_pair,
                           void* scratch, const DevRows& dst, cudaStream_t stream);

// --- cu_matmul_mma.cu ---------------------------------------------------------------------
// launch_matmul's contract on tensor cores (compute capability 8.0 and newer only): TF32
// inputs, f32 accumulation, every weight type. Batch-invariant as launch_matmul is (the
// order depends on n_in only), but its results are not launch_matmul's: a backend uses one
// of the two for every MatMul.
void launch_matmul_mma(DType type, const DevRows& w, const DevRows& x, const DevRows& dst, cudaStream_t stream);

// dst[i, :] = dequant(table[ids[i], :]) * scale. table [n, d] of `type`; dst F32 [n_ids, d].
void launch_get_rows(DType type, const DevRows& table, const int32_t* ids, int64_t n_ids, float scale,
                     const DevRows& dst, cudaStream_t stream);

// --- cu_elementwise.cu --------------------------------------------------------------------
// RmsNorm of every `chunk` consecutive elements of each row of src, times weight[0 .. chunk):
// dst[r, c] = src[r, c] / sqrt(mean(src[r, c]^2) + eps) * weight. dst may alias src.
void launch_rms_norm(const DevRows& src, const float* weight, int64_t chunk, float eps, const DevRows& dst,
                     cudaStream_t stream);

// Rotary embedding in place on x F32 [n_tok, n_heads * head_dim] (backend.h, OpKind::Rope).
// mode: 0 normal (pairs 2j, 2j+1), 2 neox (pairs j, j + n_rot / 2).
void launch_rope(const DevRows& x, const int32_t* positions, int32_t head_dim, int32_t n_rot, int32_t mode,
                 float freq_base, float pos_scale, cudaStream_t stream);

enum class Unary { Scale, Softcap };          // f0 * x, f0 * tanh(x / f0)
enum class Binary { Add, GeluMul, SiluMul };  // a + b, gelu_tanh(a) * b, silu(a) * b
void launch_unary(Unary kind, const DevRows& src, float f0, const DevRows& dst, cudaStream_t stream);
// b_broadcast: b is one row added to / multiplied with every row of a (AddRow).
void launch_binary(Binary kind, const DevRows& a, const DevRows& b, bool b_broadcast, const DevRows& dst,
                   cudaStream_t stream);

// dst[i, :] = src[ids[i], :] (F32).
void launch_copy_rows(const DevRows& src, const int32_t* ids, int64_t n_ids, const DevRows& dst, cudaStream_t stream);

// --- cu_moe.cu ----------------------------------------------------------------------------
// MoeRoute (backend.h): logits F32 [n_tok, n_expert] -> ids I32 [n_tok, k], weights F32
// [n_tok, k], as backends/cpu/moe_ref.cpp's moe_route_row (one thread per token).
void launch_moe_route(const DevRows& logits, bool renorm, float min_sum, const DevRows& ids, const DevRows& weights,
                      cudaStream_t stream);
// MoeCombine: dst[t, :] = sum_j w[t, j] * x[t * k + j, :], products rounded, rank order.
void launch_moe_combine(const DevRows& x, const DevRows& w, const DevRows& dst, cudaStream_t stream);

// --- cu_attention.cu ----------------------------------------------------------------------
// StoreKv: k_cache[slots[t], :] = k[t, :], v_cache[slots[t], :] = v[t, :]; k, v F32
// [n_tok, width]; the caches are of kv_type (F16, F32 or Q8_0), width elements per row.
void launch_store_kv(const DevRows& k, const DevRows& v, const int32_t* slots, DType kv_type, const DevRows& k_cache,
                     const DevRows& v_cache, cudaStream_t stream);

struct AttentionArgs {
  DevRows q;                 // F32 [n_q, n_heads * head_dim]
  DevRows k_cache, v_cache;  // kv_type [n_slots, n_kv_heads * head_dim]
  DType kv_type = DType::F16;
  const int32_t* positions = nullptr;  // [n_q], device
  const int32_t* slots = nullptr;      // [n_kv], device: the slot of position j
  int32_t n_kv = 0;
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int32_t window = 0;    // 0: none; else query p sees j with p - j < window
  float scale = 1.0f;    // on q.k
  float softcap = 0.0f;  // 0: none
  DevRows dst;           // F32 [n_q, n_heads * head_dim]
  // Host copies of the largest and smallest query position (the backend reads them from
  // the graph's ints): they size the split of long caches without a device round trip.
  int32_t max_position = 0, min_position = 0;
};

// Device scratch bytes launch_attention needs for `a` (0 when it runs unsplit).
size_t attention_scratch_bytes(const AttentionArgs& a);
// True when the kernels handle this head_dim and kv type.
bool attention_supported(int32_t head_dim, DType kv_type);
void launch_attention(const AttentionArgs& a, void* scratch, cudaStream_t stream);

}  // namespace hearth::cuda
