// The compute-device interface. Architecture code (engine/model) records a forward pass as
// a Graph of operations on Tensors that live in device Buffers; a Backend executes the
// graph. Nothing above this header knows which device runs it.
//
// Designed for asynchronous devices from the start:
//  - weights are uploaded once (upload_weights) and stay resident; the CPU backend maps
//    them in place;
//  - every operation is recorded first and executed later as one unit (execute), so a GPU
//    backend can build one command buffer per forward pass;
//  - small integer inputs an op needs (token ids, positions, KV slots) travel inside the
//    Graph, so a device backend uploads them together with the submission;
//  - host <-> device transfers are explicit (write, read), and so are copies inside the
//    device (copy: KV block to block, no host round trip). Every transfer reports failure;
//    a caller that gets an error must not use what the destination holds.
//
// Thread-safety: a Backend and everything it allocates are used by one thread (the
// engine thread). Buffers must not outlive their Backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device_caps.h"
#include "common/dtype.h"
#include "common/result.h"

namespace hearth {

enum class BufferKind {
  Weights,      // model parameters; read-only after upload
  KvCache,      // attention keys and values, f16 by default
  Activations,  // per-pass scratch: hidden states, logits
};

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual size_t bytes() const = 0;
  // Host address of byte 0 when the buffer is host-visible memory (CPU backend), else null.
  virtual void* host_data() { return nullptr; }
  virtual const void* host_data() const { return nullptr; }
};

// A 2-D view of rows inside a buffer: `rows` rows of `ne0` elements of `type`, consecutive
// rows `row_stride` bytes apart (a row itself is contiguous, row_bytes(type, ne0) long).
// Tensors holding several heads per row ([n_tokens, n_heads * head_dim]) say so in the
// operation that reads them.
struct Tensor {
  Buffer* buffer = nullptr;
  size_t offset = 0;  // bytes from the start of buffer
  DType type = DType::F32;
  int64_t ne0 = 0;  // elements per row
  int64_t rows = 0;
  size_t row_stride = 0;  // bytes

  bool valid() const { return buffer != nullptr; }
  size_t row_size() const { return row_bytes(type, ne0); }
  // The view of rows [first, first + n).
  Tensor slice_rows(int64_t first, int64_t n) const {
    Tensor t = *this;
    t.offset += static_cast<size_t>(first) * row_stride;
    t.rows = n;
    return t;
  }
};

// A range of Graph::ints.
struct IntSpan {
  uint32_t offset = 0;
  uint32_t count = 0;
};

enum class OpKind : uint8_t {
  // dst[i, :] = dequant(src0[ids[i], :]) * f0.  src0: table [n, d] any type; dst F32 [n_ids, d].
  GetRows,
  // For each row r and each consecutive chunk c of src1.ne0 elements in it:
  //   dst[r, c] = src0[r, c] / sqrt(mean(src0[r, c]^2) + f0) * src1[0, :]
  // so one op normalises a whole hidden state (chunk = row) or every head of a row
  // (chunk = head_dim). src0, dst F32; src1 F32 [1, chunk]. dst may alias src0.
  RmsNorm,
  // dst[t, o] = sum_i src0[o, i] * src1[t, i].  src0: weights [n_out, n_in], any weight
  // type; src1 F32 [n_tok, n_in]; dst F32 [n_tok, n_out]. The backend may quantize src1 to
  // the weight type's partner type first (as llama.cpp does); each output's reduction
  // order is fixed whatever n_tok is.
  MatMul,
  // Rotary position embedding, in place on dst F32 [n_tok, n_heads * i0].
  // ia = positions [n_tok]; i0 = head_dim; i1 = rotated dims (<= head_dim, even);
  // i2 = layout (kRopeNormal: pairs (2j, 2j+1); kRopeNeox: pairs (j, j + i1/2));
  // f0 = frequency base; f1 = position scale (1 / linear scaling factor).
  // theta_j = pos * f1 * f0^(-2j / i1).
  Rope,
  Add,  // dst = src0 + src1 (F32, same shape; dst may alias either)
  // dst[t, :] = src0[t, :] + src1[0, :]: one row added to every row (a bias, e.g. Qwen2's
  // Q/K/V biases). src0, dst F32 [n, d]; src1 F32 [1, d]. dst may alias src0.
  AddRow,
  Scale,    // dst = src0 * f0
  GeluMul,  // dst = gelu_tanh(src0) * src1
  SiluMul,  // dst = silu(src0) * src1
  Softcap,  // dst = f0 * tanh(src0 / f0)
  // Writes keys and values of new tokens into the KV cache:
  //   src2[ia[t], :] = src0[t, :], src3[ia[t], :] = src1[t, :]
  // src0/src1 F32 [n_tok, n_kv_heads * head_dim]; src2/src3 K/V cache [n_slots, same] in
  // the cache's type (F16 or F32).
  StoreKv,
  // Causal attention of one sequence's query rows over its cached keys and values.
  // src0 Q F32 [n_q, n_heads * head_dim]; src2/src3 K/V cache [n_slots, n_kv_heads * head_dim];
  // ia = positions of the query rows [n_q]; ib = KV slot of positions 0 .. n_kv-1 [n_kv];
  // i0 = n_heads, i1 = n_kv_heads (n_heads % n_kv_heads == 0; head h reads kv head
  // h / (n_heads / n_kv_heads)), i2 = head_dim, i3 = sliding window (0 = none);
  // f0 = scale applied to q.k; f1 = softcap of scores (0 = none).
  // Query at position p sees keys at positions j with j <= p and (i3 == 0 or p - j < i3).
  // dst F32 [n_q, n_heads * head_dim].
  Attention,
  // dst[i, :] = src0[ia[i], :]  (F32), e.g. the rows whose logits are wanted.
  CopyRows,

  // Mixture-of-experts layers (Qwen3-MoE) route each token to k of n_expert FFNs, run only
  // those, and add their outputs weighted by the router's probabilities:
  //   MoeRoute      router logits -> the k experts' ids and weights
  //   MatMulExperts every (token, rank) row times its expert's matrix (gate, up; then down)
  //   MoeCombine    the weighted sum of a token's k expert outputs
  // A token's experts, weights and sum depend on its own row only, never on its batch.

  // Per token t: p = softmax(src0[t, :]) over the n_expert router logits, computed as
  //   m = max_e l_e, s = sum_e exp(l_e - m) (in expert order), p_e = exp(l_e - m) * (1 / s);
  // the k = dst.ne0 experts of largest p, in descending order of p (ties: the lower id
  // first; NaN counts as -inf), are written to src1[t, 0 .. k) (I32 ids: src1 is this op's
  // second output), and their weights to dst[t, j]:
  //   i0 = 1: p[id_j] / max(sum_{j' < k} p[id_j'], f0), the sum in rank order (renormalised
  //           over the chosen k; f0 keeps it off zero: llama.cpp clamps at 2^-14);
  //   i0 = 0: p[id_j].
  // src0 F32 [n_tok, n_expert]; dst F32 [n_tok, k]; src1 I32 [n_tok, k]; 1 <= k <= n_expert.
  // exp is the device's own: the CPU's libm gives the reference bits; a GPU's exp may be a
  // few ulp away (Vulkan allows 3 + 2|x| ulp, CUDA's expf 2), so across backends the weights
  // agree within that and two experts a few ulp apart may swap rank. On one backend a row's
  // result never depends on its batch.
  MoeRoute,
  // The expert-indexed MatMul. src0: the n_expert matrices of one projection stacked,
  // [n_expert * n_out rows, n_in] (expert e's row o is row e * n_out + o), any weight type
  // MatMul takes; n_out = dst.ne0. src2 I32 [n_tok, k]: each token's experts (MoeRoute's
  // ids). For every token t and rank j:
  //   dst[t * k + j, o] = sum_i src0[e * n_out + o, i] * src1[r, i],  e = src2[t, j],
  //   r = t (i1 = 0: the token's row feeds all its experts: gate, up) or t * k + j (i1 = 1:
  //   each (token, rank) row has its own input: down).
  // src1 F32 [n_tok or n_tok * k, n_in]; dst F32 [n_tok * k, n_out]. Each output is the
  // float MatMul gives for expert e's matrix and that row alone (same activation
  // quantization, same reduction order), whatever else is in the batch and whichever tokens
  // share the expert. An id outside [0, n_expert) gives a row of zeros. Only the chosen
  // experts' rows need to be read; a backend should read each chosen expert's rows once
  // per op, for all the tokens that chose it (prefill).
  MatMulExperts,
  // dst[t, :] = sum_{j < k} src1[t, j] * src0[t * k + j, :], k = src1.ne0: each product
  // rounded to f32, then added in rank order j = 0, 1, ... (as llama.cpp adds its expert
  // views). src0 F32 [n_tok * k, d]; src1 F32 [n_tok, k] (MoeRoute's weights); dst F32
  // [n_tok, d].
  MoeCombine,
};

inline constexpr int32_t kRopeNormal = 0;
inline constexpr int32_t kRopeNeox = 2;

struct Op {
  explicit Op(OpKind k) : kind(k) {}
  OpKind kind;
  Tensor dst;
  Tensor src0, src1, src2, src3;
  IntSpan ia, ib;
  int32_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  float f0 = 0.0f, f1 = 0.0f;
};

// A recorded forward pass: operations in execution order plus the integer inputs they use.
struct Graph {
  std::vector<Op> ops;
  std::vector<int32_t> ints;

  IntSpan add_ints(std::span<const int32_t> v) {
    IntSpan s{static_cast<uint32_t>(ints.size()), static_cast<uint32_t>(v.size())};
    ints.insert(ints.end(), v.begin(), v.end());
    return s;
  }
  std::span<const int32_t> get(IntSpan s) const { return {ints.data() + s.offset, s.count}; }
  void clear() {
    ops.clear();
    ints.clear();
  }
};

// One device-side copy: `bytes` bytes from src at src_offset to dst at dst_offset. Both
// buffers belong to the same backend; when they are the same buffer the ranges must not
// overlap.
struct BufferCopy {
  const Buffer* src = nullptr;
  size_t src_offset = 0;
  Buffer* dst = nullptr;
  size_t dst_offset = 0;
  size_t bytes = 0;
};

struct DeviceInfo {
  std::string name;         // e.g. "cpu (AMD EPYC, 2 threads, avx512)"
  std::string kind;         // "cpu", "vulkan", "cuda"
  size_t memory_bytes = 0;  // device memory, 0 if shared with the host
};

// The version of the backends' arithmetic: goes up whenever any backend's kernels change
// their results in any bit. Part of the prompt cache's key, so KV computed by an older
// hearth's kernels is never restored. Not per backend: KV has one canonical layout and a
// cache written by one backend serves another (DESIGN.md, storage).
// 2: the CPU's AVX-512 Q4_0 / Q5_0 / Q4_K / Q6_K kernels follow the scalar arithmetic.
// 3: and its Q8_0 kernels; its attention has its own exp and sums q.k per key in order.
// 4: its attention is an online softmax over tiles of 256 keys on the grid of absolute positions.
inline constexpr uint32_t kNumericsVersion = 4;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceInfo info() const = 0;

  // A buffer of `bytes` bytes; contents undefined. Fails when the device is out of memory.
  virtual Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind kind) = 0;

  // Weights resident on the device, initialised from host memory. A host-memory backend
  // may reference `host` in place instead of copying: the caller keeps `host` alive and
  // unchanged for the buffer's lifetime.
  virtual Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) = 0;

  // Called once after upload_weights with the views of the weights buffer that MatMul
  // reads (one may be a table GetRows reads too: an output tied to the embeddings): a
  // backend may keep them in a layout of its own for its kernels (the CPU backend
  // interleaves 16 rows of Q4_0 / Q5_0 / Q8_0 / Q4_K), with the same values and results,
  // for MatMul and GetRows alike. The views stay the names of those weights in later
  // graphs. host_droppable:
  // the host memory given to upload_weights is a private read-only file mapping, so pages
  // copied elsewhere may be released (they would be read from the file again if touched).
  // An error leaves the weights usable as they were uploaded.
  virtual Status prepare_matmul_weights(std::span<const Tensor> weights, bool host_droppable) {
    (void)weights;
    (void)host_droppable;
    return {};
  }

  // What execute() can run: weight types of MatMul / GetRows, KV cache types.
  virtual const DeviceCaps& caps() const = 0;

  // Host <-> device copies; they complete before returning. An error (a range outside the
  // buffer, a buffer of another backend, a device failure) leaves the destination's bytes
  // undefined.
  virtual Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) = 0;
  virtual Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) = 0;

  // Device-side copies, all complete before returning (one submission on a GPU). Every copy
  // is checked before any runs; on an error the destinations' bytes are undefined.
  virtual Status copy(std::span<const BufferCopy> copies) = 0;

  // Runs every op of the graph in order and waits for completion. The graph is checked
  // first (check_graph in graph_check.h, then the device's own limits): a graph that breaks
  // the contract is an error, and nothing of it runs.
  virtual Status execute(const Graph& graph) = 0;
};

}  // namespace hearth
