// Row-wise operations of the CPU backend: embedding lookup, RMSNorm, RoPE, elementwise
// activations, KV stores, row copies and the quantized matmul driver.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/f16_convert.h"
#include "backends/cpu/host_buffer.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"
#include "backends/rope_math.h"
#include "common/fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hearth::cpu {

void load_row_f32(const Tensor& t, int64_t r, float* dst) {
  const uint8_t* src = tensor_data(t) + static_cast<size_t>(r) * t.row_stride;
  if (t.type == DType::F16) return f16_to_f32_row(reinterpret_cast<const uint16_t*>(src), dst, t.ne0);
  dequantize_row(t.type, src, dst, t.ne0);
}

void store_row_f32(const Tensor& t, int64_t r, const float* src) {
  uint8_t* dst = tensor_data(t) + static_cast<size_t>(r) * t.row_stride;
  if (t.type == DType::F16) return f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), t.ne0);
  quantize_row(t.type, src, dst, t.ne0);
}

void op_get_rows(const Op& op, const Graph& g, ExecContext& ctx) {
  const std::span<const int32_t> ids = g.get(op.ia);
  const Tensor& table = op.src0;
  // A table repacked at load (the embeddings an output layer shares): each row is taken
  // back out of its group into a plain row first.
  const auto* hb = dynamic_cast<const HostBuffer*>(table.buffer);
  const uint8_t* repacked = hb != nullptr ? hb->repacked(table) : nullptr;
  run_split(ctx, static_cast<int64_t>(ids.size()), [&](int ith, int nth) {
    int64_t b, e;
    split_range(static_cast<int64_t>(ids.size()), ith, nth, &b, &e);
    std::vector<uint8_t> plain(repacked != nullptr ? table.row_size() : 0);
    for (int64_t i = b; i < e; ++i) {
      const uint8_t* src = tensor_data(table) + static_cast<size_t>(ids[i]) * table.row_stride;
      if (repacked != nullptr) {
        unrepack_row(table.type, table.ne0, repacked, ids[i], plain.data());
        src = plain.data();
      }
      float* dst = row_f32(op.dst, i);
      dequantize_row(table.type, src, dst, table.ne0);
      if (op.f0 != 1.0f)
        for (int64_t k = 0; k < table.ne0; ++k) dst[k] *= op.f0;
    }
  });
}

void op_rms_norm(const Op& op, ExecContext& ctx) {
  const int64_t chunk = op.src1.ne0;
  const int64_t n_chunks = op.src0.ne0 / chunk;
  const float* w = row_f32(op.src1, 0);
  const float eps = op.f0;
  run_split(ctx, op.src0.rows * n_chunks, [&](int ith, int nth) {
    int64_t b, e;
    split_range(op.src0.rows * n_chunks, ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / n_chunks, c = i % n_chunks;
      const float* x = row_f32(op.src0, r) + c * chunk;
      float* y = row_f32(op.dst, r) + c * chunk;
      double sum = 0.0;  // double, as ggml does, so long rows lose nothing
      for (int64_t k = 0; k < chunk; ++k) sum += static_cast<double>(x[k]) * x[k];
      const float scale = 1.0f / std::sqrt(static_cast<float>(sum / chunk) + eps);
      for (int64_t k = 0; k < chunk; ++k) y[k] = (x[k] * scale) * w[k];
    }
  });
}

void op_rope(const Op& op, const Graph& g, ExecContext& ctx) {
  const std::span<const int32_t> pos = g.get(op.ia);
  const int64_t head_dim = op.i0, n_rot = op.i1;
  const bool neox = op.i2 == kRopeNeox;
  const int64_t n_heads = op.dst.ne0 / head_dim;
  const float theta_scale = rope_theta_ratio(op.f0, static_cast<int>(n_rot));
  run_split(ctx, op.dst.rows, [&](int ith, int nth) {
    std::vector<float> cs(n_rot);  // cos, sin pairs for one position
    int64_t b, e;
    split_range(op.dst.rows, ith, nth, &b, &e);
    for (int64_t t = b; t < e; ++t) {
      // theta_j = p * scale * base^(-2j/n_rot), accumulated in float as ggml does.
      float theta = static_cast<float>(pos[t]) * op.f1;
      for (int64_t j = 0; j < n_rot / 2; ++j) {
        cs[2 * j] = std::cos(theta);
        cs[2 * j + 1] = std::sin(theta);
        theta *= theta_scale;
      }
      float* row = row_f32(op.dst, t);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* x = row + h * head_dim;
        for (int64_t j = 0; j < n_rot / 2; ++j) {
          const int64_t i0 = neox ? j : 2 * j;
          const int64_t i1 = neox ? j + n_rot / 2 : 2 * j + 1;
          const float c = cs[2 * j], s = cs[2 * j + 1];
          const float x0 = x[i0], x1 = x[i1];
          x[i0] = x0 * c - x1 * s;
          x[i1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

namespace {

inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// GELU through a table indexed by the f16 bits of x, as ggml's CPU backend computes it
// (so our FFN activations round as llama.cpp's do), and ~10x faster than tanhf. Outside
// [-10, 10] GELU is 0 or x to within f32 precision.
struct GeluTable {
  uint16_t v[1 << 16];
  GeluTable() {
    for (uint32_t i = 0; i < (1u << 16); ++i) v[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(i))));
  }
};

inline float gelu_fast(const GeluTable& t, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(t.v[fp32_to_fp16(x)]);
}

// y[k] = gelu_fast(x[k]) * c[k], bitwise; the f16 conversions through F16C.
void gelu_mul_row(const GeluTable& t, const float* x, const float* c, float* y, int64_t n);

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void gelu_mul_row_f16c(const GeluTable& t, const float* x, const float* c,
                                                            float* y, int64_t n) {
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  alignas(16) uint16_t h[8];
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    for (int i = 0; i < 8; ++i) h[i] = t.v[h[i]];
    __m256 g = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
    g = _mm256_blendv_ps(g, v, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(y + k, _mm256_mul_ps(g, _mm256_loadu_ps(c + k)));
  }
  for (; k < n; ++k) y[k] = gelu_fast(t, x[k]) * c[k];
}
#endif

void gelu_mul_row(const GeluTable& t, const float* x, const float* c, float* y, int64_t n) {
#if defined(__x86_64__)
  if (active_simd_level() >= SimdLevel::AVX2) return gelu_mul_row_f16c(t, x, c, y, n);
#endif
  for (int64_t k = 0; k < n; ++k) y[k] = gelu_fast(t, x[k]) * c[k];
}

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

}  // namespace

void op_elementwise(const Op& op, ExecContext& ctx) {
  const int64_t n = op.dst.ne0;
  run_split(ctx, op.dst.rows, [&](int ith, int nth) {
    int64_t b, e;
    split_range(op.dst.rows, ith, nth, &b, &e);
    for (int64_t r = b; r < e; ++r) {
      const float* a = row_f32(op.src0, r);
      float* y = row_f32(op.dst, r);
      switch (op.kind) {
        case OpKind::Add: {
          const float* c = row_f32(op.src1, r);
          for (int64_t k = 0; k < n; ++k) y[k] = a[k] + c[k];
          break;
        }
        case OpKind::AddRow: {
          const float* c = row_f32(op.src1, 0);
          for (int64_t k = 0; k < n; ++k) y[k] = a[k] + c[k];
          break;
        }
        case OpKind::Scale:
          for (int64_t k = 0; k < n; ++k) y[k] = a[k] * op.f0;
          break;
        case OpKind::GeluMul: {
          static const GeluTable* table = new GeluTable();  // 128 KiB, built once, never freed
          gelu_mul_row(*table, a, row_f32(op.src1, r), y, n);
          break;
        }
        case OpKind::SiluMul: {
          const float* c = row_f32(op.src1, r);
          for (int64_t k = 0; k < n; ++k) y[k] = silu(a[k]) * c[k];
          break;
        }
        case OpKind::Softcap:
          for (int64_t k = 0; k < n; ++k) y[k] = op.f0 * std::tanh(a[k] / op.f0);
          break;
        default:
          break;
      }
    }
  });
}

void op_store_kv(const Op& op, const Graph& g, ExecContext& ctx) {
  const std::span<const int32_t> slots = g.get(op.ia);
  run_split(ctx, static_cast<int64_t>(slots.size()), [&](int ith, int nth) {
    int64_t b, e;
    split_range(static_cast<int64_t>(slots.size()), ith, nth, &b, &e);
    for (int64_t t = b; t < e; ++t) {
      for (int which = 0; which < 2; ++which) {
        const Tensor& src = which == 0 ? op.src0 : op.src1;
        const Tensor& cache = which == 0 ? op.src2 : op.src3;
        store_row_f32(cache, slots[t], row_f32(src, t));
      }
    }
  });
}

void op_copy_rows(const Op& op, const Graph& g, ExecContext&) {
  const std::span<const int32_t> ids = g.get(op.ia);
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(row_f32(op.dst, static_cast<int64_t>(i)), row_f32(op.src0, ids[i]),
                static_cast<size_t>(op.src0.ne0) * sizeof(float));
}

namespace {

// Whether two views share a byte of one buffer (each from its offset to its last row's end).
bool views_overlap(const Tensor& a, const Tensor& b) {
  if (a.buffer != b.buffer || a.rows == 0 || b.rows == 0) return false;
  const size_t a_end = a.offset + static_cast<size_t>(a.rows - 1) * a.row_stride + a.row_size();
  const size_t b_end = b.offset + static_cast<size_t>(b.rows - 1) * b.row_stride + b.row_size();
  return a.offset < b_end && b.offset < a_end;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.type == b.type && a.ne0 == b.ne0 && a.rows == b.rows &&
         a.row_stride == b.row_stride;
}

// One MatMul of a group: its weights (repacked or not), output and chunks of 16-row groups.
struct MatMulPart {
  const Op* op;
  const uint8_t* repacked;
  int64_t units, per_chunk, chunks;
};

}  // namespace

size_t matmul_group_end(std::span<const Op> ops, size_t first) {
  const Op& head = ops[first];
  const DType act_type = vec_dot_type(head.src0.type);
  size_t end = first + 1;
  for (; end < ops.size(); ++end) {
    const Op& op = ops[end];
    if (op.kind != OpKind::MatMul || !same_view(op.src1, head.src1) || vec_dot_type(op.src0.type) != act_type) break;
    // Every op reads the input before any writes: no output may land on it or on another's.
    bool clash = views_overlap(op.dst, head.src1);
    for (size_t k = first; k < end && !clash; ++k) clash = views_overlap(op.dst, ops[k].dst);
    if (clash) break;
  }
  return end;
}

namespace {

// x's rows in act_type (the weights' partner format) in ctx's scratch, or x itself (F32).
const void* matmul_input(const Tensor& x, DType act_type, ExecContext& ctx, size_t* stride) {
  const int64_t n_in = x.ne0, n_tok = x.rows;
  *stride = x.row_stride;
  if (act_type == DType::F32) return tensor_data(x);
  *stride = row_bytes(act_type, n_in);
  uint8_t* q = ctx.scratch_bytes(*stride * static_cast<size_t>(n_tok));
  run_split(ctx, n_tok, [&](int ith, int nth) {
    int64_t b, e;
    split_range(n_tok, ith, nth, &b, &e);
    for (int64_t t = b; t < e; ++t)
      quantize_activations(act_type, row_f32(x, t), q + static_cast<size_t>(t) * *stride, n_in);
  });
  return q;
}

// Output rows split across threads in multiples of 16 so tiles stay whole; weights
// repacked at load (repack.h) have whole 16-row groups, so every split is one.
constexpr int64_t kRowQuantum = 16;
static_assert(kRowQuantum == kRepackRows);

// Chunks of whole groups claimed one at a time, so the thread that streams faster (the
// other shares its memory bus with another process, or started late) takes more: no chunk
// over kChunkBytes of weights, and (one thread: one chunk a matrix) at least one chunk per
// pool task over the group, dealt to its matrices by their bytes. With one range per
// task, decode's big projections (Gemma's tied 178 MB output table, 8 tasks of 22 MB) left
// one thread spinning for up to a task at the end. A row's arithmetic does not depend on
// its chunk or its group.
std::vector<MatMulPart> plan_chunks(std::span<const Op> ops, const ThreadPool& pool, int64_t* total_chunks) {
  constexpr size_t kChunkBytes = size_t{1} << 20;
  auto bytes_of = [](const Tensor& w) { return w.row_size() * static_cast<size_t>(w.rows); };
  size_t group_bytes = 0;
  for (const Op& op : ops) group_bytes += bytes_of(op.src0);
  std::vector<MatMulPart> parts(ops.size());
  *total_chunks = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Tensor& w = ops[i].src0;
    const auto* hb = dynamic_cast<const HostBuffer*>(w.buffer);
    const int64_t units = (w.rows + kRowQuantum - 1) / kRowQuantum;
    const auto by_bytes = static_cast<int64_t>(bytes_of(w) / kChunkBytes);
    const auto by_share = static_cast<int64_t>((static_cast<size_t>(pool.n_tasks()) * bytes_of(w) + group_bytes - 1) /
                                               std::max<size_t>(group_bytes, 1));
    const int64_t chunks = pool.size() == 1 ? 1 : std::clamp<int64_t>(std::max(by_share, by_bytes), 1, units);
    const int64_t per_chunk = (units + chunks - 1) / chunks;
    parts[i] = {&ops[i], hb != nullptr ? hb->repacked(w) : nullptr, units, per_chunk,
                (units + per_chunk - 1) / per_chunk};
    *total_chunks += parts[i].chunks;
  }
  return parts;
}

}  // namespace

// The matrices of a group (a layer's Q, K and V, or gate and up, which read the same
// input) share one job: a decode step's small projections take a few microseconds each,
// and a job's start and join and each thread's first misses weighed on them as much again.
void op_matmuls(std::span<const Op> ops, ExecContext& ctx) {
  const Tensor& x = ops.front().src1;
  const int64_t n_in = x.ne0, n_tok = x.rows;
  size_t act_stride;
  const void* act = matmul_input(x, vec_dot_type(ops.front().src0.type), ctx, &act_stride);
  int64_t total_chunks;
  const std::vector<MatMulPart> parts = plan_chunks(ops, *ctx.pool, &total_chunks);
  std::atomic<int64_t> next{0};
  ctx.pool->run([&](int, int) {
    size_t part = 0;
    int64_t first_chunk = 0;  // of parts[part], in the group's numbering
    for (int64_t c = next.fetch_add(1); c < total_chunks; c = next.fetch_add(1)) {
      while (c >= first_chunk + parts[part].chunks) first_chunk += parts[part++].chunks;
      const MatMulPart& p = parts[part];
      const Tensor& w = p.op->src0;
      const int64_t ub = (c - first_chunk) * p.per_chunk;
      const int64_t b = ub * kRowQuantum, e = std::min(w.rows, (ub + p.per_chunk) * kRowQuantum);
      const size_t y_stride = p.op->dst.row_stride / sizeof(float);
      float* y = row_f32(p.op->dst, 0);
      if (p.repacked != nullptr) {
        gemm_repacked(w.type, n_in, p.repacked, b, e, act, act_stride, n_tok, y, y_stride);
      } else {
        gemm(w.type, n_in, tensor_data(w), w.row_stride, b, e, act, act_stride, n_tok, y, y_stride);
      }
    }
  });
}

}  // namespace hearth::cpu
