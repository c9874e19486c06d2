// Per-op dispatch planning: shapes -> grids, tensors -> bound buffer ranges + element
// offsets in push constants. Buffers are bound from an offset aligned down to
// minStorageBufferOffsetAlignment; the shader adds the element offset of the tensor.
#include "backends/vulkan/vk_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "backends/graph_check.h"
#include "backends/rope_math.h"

namespace hearth::vulkan {

struct OpPlanner::View {
  VkDescriptorBufferInfo info{};
  uint32_t off = 0;     // elements (units) from the bound offset to row r0
  uint32_t stride = 0;  // row stride in units
  ByteRange range;      // bytes the rows occupy, for barrier tracking
};

namespace {

constexpr uint32_t kWg = 64;           // WG in shaders/common.glsl
constexpr uint32_t kMatmulTokens = 8;  // TT in shaders/matmul.comp
constexpr int64_t kMaxHeadDim = 512;   // MAX_HD in shaders/attention.comp

// Units of the KV caches' offsets and strides in the shaders (kv.glsl): halves, floats, or
// bytes for Q8_0's 34-byte blocks.
size_t kv_unit(DType t) {
  return t == DType::F16 ? 2 : t == DType::Q8_0 ? 1 : 4;
}

uint32_t div_up(int64_t a, int64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

void bind(Dispatch* d, int binding, const VkDescriptorBufferInfo& info) {
  d->bind[binding] = info;
}

// Binds a view to its slot (0 = dst, 1..4 = src0..src3) and sets the slot's element
// offset and row stride in the push constants: every shader reads them by slot.
void bind(Dispatch* d, int binding, const OpPlanner::View& v) {
  d->bind[binding] = v.info;
  uint32_t* off[] = {&d->pc.d_off, &d->pc.s0_off, &d->pc.s1_off, &d->pc.s2_off, &d->pc.s3_off};
  uint32_t* stride[] = {&d->pc.d_stride, &d->pc.s0_stride, &d->pc.s1_stride, &d->pc.s2_stride, &d->pc.s3_stride};
  *off[binding] = v.off;
  *stride[binding] = v.stride;
}

}  // namespace

int64_t OpPlanner::rows_per_window(const Tensor& t) const {
  const int64_t usable = static_cast<int64_t>(ctx_.max_storage_range) - static_cast<int64_t>(ctx_.storage_align) -
                         static_cast<int64_t>(t.row_size()) - 4;
  if (t.row_stride == 0 || usable < 0) return std::max<int64_t>(1, t.rows);
  return std::max<int64_t>(1, usable / static_cast<int64_t>(t.row_stride) + 1);
}

Result<OpPlanner::View> OpPlanner::view(const Tensor& t, int64_t r0, int64_t r1, size_t unit) const {
  const auto* vb = dynamic_cast<const VulkanBuffer*>(t.buffer);
  if (vb == nullptr) return make_error("a tensor is not in a buffer of this Vulkan backend");
  const size_t lo = t.offset + static_cast<size_t>(r0) * t.row_stride;
  const size_t hi = t.offset + static_cast<size_t>(r1 - 1) * t.row_stride + t.row_size();
  if (hi > vb->bytes()) return make_error("a tensor extends past the end of its buffer");
  if (lo % unit != 0 || t.row_stride % unit != 0)
    return make_error("a tensor's offset or row stride is not a multiple of its element size");
  const VkDeviceSize start = lo - lo % ctx_.storage_align;
  VkDeviceSize range = (hi - start + 3) / 4 * 4;
  range = std::min<VkDeviceSize>(range, vb->allocated() - start);
  if (range > ctx_.max_storage_range)
    return make_error("a tensor of " + std::to_string(hi - lo) + " bytes exceeds the device's storage buffer range (" +
                      std::to_string(ctx_.max_storage_range) + " bytes)");
  View v;
  v.info = {vb->handle(), start, range};
  v.off = static_cast<uint32_t>((lo - start) / unit);
  v.stride = static_cast<uint32_t>(t.row_stride / unit);
  v.range = {vb->handle(), lo, hi};
  return v;
}

Status OpPlanner::plan(const Op& op, const Graph& /*graph*/, std::vector<Dispatch>* out) {
  Status st = make_error("not supported by the Vulkan backend");  // an op kind with no case below
  switch (op.kind) {
    case OpKind::GetRows:
      st = get_rows(op, out);
      break;
    case OpKind::RmsNorm:
      st = rms_norm(op, out);
      break;
    case OpKind::MatMul:
      st = matmul(op, out);
      break;
    case OpKind::Rope:
      st = rope(op, out);
      break;
    case OpKind::Add:
    case OpKind::AddRow:
    case OpKind::Scale:
    case OpKind::GeluMul:
    case OpKind::SiluMul:
    case OpKind::Softcap:
      st = elementwise(op, out);
      break;
    case OpKind::StoreKv:
      st = store_kv(op, out);
      break;
    case OpKind::Attention:
      st = attention(op, out);
      break;
    case OpKind::CopyRows:
      st = copy_rows(op, out);
      break;
    case OpKind::MoeRoute:
      st = moe_route(op, out);
      break;
    case OpKind::MatMulExperts:
      st = matmul_experts(op, out);
      break;
    case OpKind::MoeCombine:
      st = moe_combine(op, out);
      break;
  }
  if (!st) return make_error(std::string("vulkan: ") + op_name(op.kind) + ": " + st.error().message);
  return {};
}

#define HEARTH_TRY_VIEW(var, expr)      \
  Result<View> var##_r = (expr);        \
  if (!var##_r) return var##_r.error(); \
  const View& var = *var##_r;

Status OpPlanner::get_rows(const Op& op, std::vector<Dispatch>* out) {
  const Tensor& table = op.src0;
  const int64_t n = op.ia.count;
  if (n == 0 || table.rows == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("get_rows", static_cast<uint32_t>(table.type), false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, n, 4));
  const int64_t window = rows_per_window(table);
  for (int64_t w0 = 0; w0 < table.rows; w0 += window) {
    const int64_t w1 = std::min(table.rows, w0 + window);
    HEARTH_TRY_VIEW(src, view(table, w0, w1, 1));
    Dispatch d;
    d.pipeline = *pipe;
    bind(&d, 0, dst);
    bind(&d, 1, src);
    d.pc.ne0 = static_cast<uint32_t>(table.ne0);
    d.pc.rows = static_cast<uint32_t>(n);
    d.pc.ia_off = op.ia.offset;
    d.pc.u0 = static_cast<uint32_t>(w0);
    d.pc.u1 = static_cast<uint32_t>(w1);
    d.pc.f0 = op.f0;
    d.groups[0] = div_up(div_up(table.ne0, 32), kWg);
    d.groups[1] = static_cast<uint32_t>(n);
    d.reads[0] = src.range;
    d.writes[0] = dst.range;
    out->push_back(d);
  }
  return {};
}

Status OpPlanner::rms_norm(const Op& op, std::vector<Dispatch>* out) {
  const int64_t chunk = op.src1.ne0;
  if (op.src0.rows == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("rms_norm", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, op.src0.rows, 4));
  HEARTH_TRY_VIEW(src, view(op.src0, 0, op.src0.rows, 4));
  HEARTH_TRY_VIEW(w, view(op.src1, 0, 1, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, src);
  bind(&d, 2, w.info);
  d.pc.s1_off = w.off;
  d.pc.ne0 = static_cast<uint32_t>(chunk);
  d.pc.rows = static_cast<uint32_t>(op.src0.rows);
  d.pc.f0 = op.f0;
  d.groups[0] = static_cast<uint32_t>(op.src0.ne0 / chunk);
  d.groups[1] = static_cast<uint32_t>(op.src0.rows);
  d.reads[0] = src.range;
  d.reads[1] = w.range;
  d.writes[0] = dst.range;
  out->push_back(d);
  return {};
}

// Lanes per output row: on a CPU device (lavapipe) every invocation costs the same
// whether it has work or not, so one lane takes a whole row; GPUs spread a row's chunks
// over up to 32 lanes (adjacent lanes read adjacent blocks).
uint32_t OpPlanner::matmul_lanes(int64_t n_in) const {
  const int64_t n_chunks = (n_in + 31) / 32;
  // HEARTH_VK_MATMUL_LANES (1..64, a power of two) overrides it, e.g. to test the GPU
  // layout on lavapipe.
  static const uint32_t forced_lanes = [] {
    const char* v = std::getenv("HEARTH_VK_MATMUL_LANES");
    const long n = v ? std::strtol(v, nullptr, 10) : 0;
    return n >= 1 && n <= 64 && (n & (n - 1)) == 0 ? static_cast<uint32_t>(n) : 0u;
  }();
  uint32_t lanes = 1;
  if (forced_lanes != 0) {
    lanes = forced_lanes;
  } else if (ctx_.props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) {
    while (lanes < 32 && lanes < n_chunks) lanes *= 2;
  }
  return lanes;
}

Status OpPlanner::matmul(const Op& op, std::vector<Dispatch>* out) {
  const Tensor& w = op.src0;
  const int64_t n_out = w.rows, n_tok = op.src1.rows;
  if (n_out == 0 || n_tok == 0) return {};
  // One token: the matrix-vector variant (TT = 1); batches: 8 tokens per weight read.
  const uint32_t tile = n_tok == 1 ? 1 : kMatmulTokens;
  const uint32_t lanes = matmul_lanes(w.ne0);
  const uint32_t rows_per_group = kWg / lanes;
  Result<VkPipeline> pipe = pipelines_.get("matmul", static_cast<uint32_t>(w.type), false, tile, lanes);
  if (!pipe) return pipe.error();
  const auto& lim = ctx_.props.limits.maxComputeWorkGroupCount;
  const int64_t row_chunk = std::min<int64_t>(rows_per_window(w), lim[0]);
  Tensor dst_rows = op.dst;  // dst windows cover whole rows of n_out outputs
  const int64_t tok_chunk =
      std::min<int64_t>({rows_per_window(op.src1), rows_per_window(dst_rows), static_cast<int64_t>(lim[1]) * tile});
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_chunk) {
    const int64_t t1 = std::min(n_tok, t0 + tok_chunk);
    HEARTH_TRY_VIEW(x, view(op.src1, t0, t1, 4));
    HEARTH_TRY_VIEW(y, view(op.dst, t0, t1, 4));
    for (int64_t o0 = 0; o0 < n_out; o0 += row_chunk) {
      const int64_t o1 = std::min(n_out, o0 + row_chunk);
      HEARTH_TRY_VIEW(wv, view(w, o0, o1, 1));
      Dispatch d;
      d.pipeline = *pipe;
      bind(&d, 0, y);
      bind(&d, 1, wv);
      bind(&d, 2, x);
      d.pc.ne0 = static_cast<uint32_t>(w.ne0);
      d.pc.rows = static_cast<uint32_t>(t1 - t0);
      d.pc.u0 = static_cast<uint32_t>(o0);
      d.pc.n_ia = static_cast<uint32_t>(o1 - o0);
      d.groups[0] = div_up(o1 - o0, rows_per_group);
      d.groups[1] = div_up(t1 - t0, tile);
      d.reads[0] = wv.range;
      d.reads[1] = x.range;
      d.writes[0] = y.range;
      out->push_back(d);
    }
  }
  return {};
}

Status OpPlanner::rope(const Op& op, std::vector<Dispatch>* out) {
  const int64_t head_dim = op.i0, n_rot = op.i1;
  if (op.dst.rows == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("rope", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, op.dst.rows, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  d.pc.ne0 = static_cast<uint32_t>(op.dst.ne0);
  d.pc.rows = static_cast<uint32_t>(op.dst.rows);
  d.pc.ia_off = op.ia.offset;
  d.pc.i0 = op.i0;
  d.pc.i1 = op.i1;
  d.pc.i2 = op.i2;
  d.pc.f0 = rope_theta_ratio(op.f0, static_cast<int>(n_rot));
  d.pc.f1 = op.f1;
  d.groups[0] = div_up(op.dst.ne0 / head_dim * (n_rot / 2), kWg);
  d.groups[1] = static_cast<uint32_t>(op.dst.rows);
  d.reads[0] = dst.range;
  d.writes[0] = dst.range;
  out->push_back(d);
  return {};
}

Status OpPlanner::elementwise(const Op& op, std::vector<Dispatch>* out) {
  uint32_t code = 0;
  bool binary = true;
  switch (op.kind) {
    case OpKind::Add:
      code = 0;
      break;
    case OpKind::AddRow:
      code = 5;
      break;
    case OpKind::Scale:
      code = 1;
      binary = false;
      break;
    case OpKind::GeluMul:
      code = 2;
      break;
    case OpKind::SiluMul:
      code = 3;
      break;
    default:
      code = 4;
      binary = false;
      break;  // Softcap
  }
  // AddRow reads row 0 of src1 for every row of dst.
  const int64_t src1_rows = op.kind == OpKind::AddRow ? 1 : op.dst.rows;
  const int64_t rows = op.dst.rows;
  if (rows == 0 || op.dst.ne0 == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("elementwise", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, rows, 4));
  HEARTH_TRY_VIEW(a, view(op.src0, 0, rows, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, a);
  d.reads[0] = a.range;
  if (binary) {
    HEARTH_TRY_VIEW(b, view(op.src1, 0, src1_rows, 4));
    bind(&d, 2, b);
    d.reads[1] = b.range;
  }
  d.pc.ne0 = static_cast<uint32_t>(op.dst.ne0);
  d.pc.rows = static_cast<uint32_t>(rows);
  d.pc.f0 = op.f0;
  d.pc.u0 = code;
  d.groups[0] = div_up(op.dst.ne0, kWg);
  d.groups[1] = static_cast<uint32_t>(rows);
  d.writes[0] = dst.range;
  out->push_back(d);
  return {};
}

Status OpPlanner::store_kv(const Op& op, std::vector<Dispatch>* out) {
  const DType ct = op.src2.type;
  const int64_t n = op.ia.count, ne0 = op.src0.ne0;
  const bool q8 = ct == DType::Q8_0;
  if (ne0 % 2 != 0) return make_error("the KV row length must be even (the shader stores pairs)");
  if (q8 && ne0 % 64 != 0) return make_error("a Q8_0 KV row length must be a multiple of 64 (pairs of blocks)");
  if (n == 0) return {};
  const size_t unit = kv_unit(ct);
  if (((ct == DType::F16 && !ctx_.use_fp16) || q8) &&
      ((op.src2.offset | op.src2.row_stride | op.src3.offset | op.src3.row_stride) % 4 != 0))
    return make_error(std::string(dtype_name(ct)) + " cache rows must start on 4-byte boundaries");
  Result<VkPipeline> pipe = pipelines_.get("store_kv", static_cast<uint32_t>(ct), ct == DType::F16);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(k, view(op.src0, 0, n, 4));
  HEARTH_TRY_VIEW(v, view(op.src1, 0, n, 4));
  HEARTH_TRY_VIEW(kc, view(op.src2, 0, op.src2.rows, unit));
  HEARTH_TRY_VIEW(vc, view(op.src3, 0, op.src3.rows, unit));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 1, k);
  bind(&d, 2, v);
  bind(&d, 3, kc);
  bind(&d, 4, vc);
  d.pc.ne0 = static_cast<uint32_t>(ne0);
  d.pc.rows = static_cast<uint32_t>(n);
  d.pc.ia_off = op.ia.offset;
  d.groups[0] = div_up(q8 ? ne0 / 64 : ne0 / 2, kWg);
  d.groups[1] = static_cast<uint32_t>(n);
  d.reads[0] = k.range;
  d.reads[1] = v.range;
  d.writes[0] = kc.range;
  d.writes[1] = vc.range;
  out->push_back(d);
  return {};
}

// Long caches with few (query row, head) pairs (decode) leave a GPU mostly idle with one
// workgroup per pair; splitting the positions over up to 32 workgroups (>= 512 positions
// each) and merging the partials fixes that. CPU devices (lavapipe) gain nothing from it.
// HEARTH_VK_ATTN_SPLIT=n forces n splits (for tests).
uint32_t OpPlanner::attention_splits(const Op& op) const {
  static const long forced = [] {
    const char* v = std::getenv("HEARTH_VK_ATTN_SPLIT");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  const int64_t n_kv = op.ib.count, pairs = op.src0.rows * op.i0;
  int64_t span = n_kv;
  if (op.i3 > 0) span = std::min<int64_t>(span, op.i3);
  int64_t splits = 1;
  if (forced > 0) {
    splits = forced;
  } else if (ctx_.props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU && pairs < 256 && span > 1024) {
    splits = std::min<int64_t>(32, (span + 511) / 512);
  }
  splits = std::max<int64_t>(1, std::min<int64_t>(splits, (span + kWg - 1) / kWg));
  while (splits > 1 && split_scratch_bytes(op, static_cast<uint32_t>(splits)) > ctx_.max_storage_range) splits /= 2;
  return static_cast<uint32_t>(splits);
}

size_t OpPlanner::split_scratch_bytes(const Op& op, uint32_t splits) {
  return static_cast<size_t>(op.src0.rows) * static_cast<size_t>(op.i0) * splits * (static_cast<size_t>(op.i2) + 2) *
         sizeof(float);
}

size_t OpPlanner::group_bytes(const Op& op) {
  // HEARTH_VK_EXPERTS_GROUPED=0 runs batches a pair per workgroup row too (to compare).
  static const bool off = [] {
    const char* v = std::getenv("HEARTH_VK_EXPERTS_GROUPED");
    return v != nullptr && *v == '0';
  }();
  const int64_t n_tok = op.src2.rows, k = op.src2.ne0, n_out = op.dst.ne0;
  if (off || n_tok <= 1 || n_out <= 0) return 0;
  const int64_t n_expert = op.src0.rows / n_out;
  return static_cast<size_t>(2 * (n_expert + 2) + n_tok * k) * sizeof(uint32_t);
}

Status OpPlanner::prepare(const Graph& graph) {
  size_t need = 0, need_groups = 0;
  for (const Op& op : graph.ops) {
    if (op.kind == OpKind::MatMulExperts) need_groups = std::max(need_groups, group_bytes(op));
    if (op.kind != OpKind::Attention || op.i0 <= 0 || op.i2 <= 0) continue;
    const uint32_t s = attention_splits(op);
    if (s > 1) need = std::max(need, split_scratch_bytes(op, s));
  }
  // (The previous pass has completed: its buffers may go.)
  for (auto [buf, bytes] : {std::pair{&scratch_, need}, std::pair{&groups_, need_groups}}) {
    if (bytes == 0 || (buf->buffer && buf->bytes >= bytes)) continue;
    destroy_buffer(ctx_, buf);
    Result<DeviceBuffer> b = create_buffer(ctx_, bytes, false);
    if (!b) return b.error();
    *buf = *b;
  }
  return {};
}

Status OpPlanner::attention(const Op& op, std::vector<Dispatch>* out) {
  const DType ct = op.src2.type;
  const int64_t n_heads = op.i0, head_dim = op.i2;
  if (head_dim > kMaxHeadDim) return make_error("head_dim must be at most 512 (the shader's limit)");
  const int64_t n_q = op.src0.rows;
  if (n_q == 0) return {};
  const size_t unit = kv_unit(ct);
  Result<VkPipeline> pipe = pipelines_.get("attention", static_cast<uint32_t>(ct), ct == DType::F16);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(q, view(op.src0, 0, n_q, 4));
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, n_q, 4));
  HEARTH_TRY_VIEW(kc, view(op.src2, 0, op.src2.rows, unit));
  HEARTH_TRY_VIEW(vc, view(op.src3, 0, op.src3.rows, unit));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, q);
  bind(&d, 3, kc);
  bind(&d, 4, vc);
  d.pc.rows = static_cast<uint32_t>(n_q);
  d.pc.ia_off = op.ia.offset;
  d.pc.n_ia = op.ia.count;
  d.pc.ib_off = op.ib.offset;
  d.pc.n_ib = op.ib.count;
  d.pc.i0 = op.i0;
  d.pc.i1 = op.i1;
  d.pc.i2 = op.i2;
  d.pc.i3 = op.i3;
  d.pc.f0 = op.f0;
  d.pc.f1 = op.f1;
  d.groups[0] = static_cast<uint32_t>(n_heads);
  d.groups[1] = static_cast<uint32_t>(n_q);
  d.reads[0] = q.range;
  d.reads[1] = kc.range;
  d.reads[2] = vc.range;
  d.writes[0] = dst.range;
  const uint32_t splits = attention_splits(op);
  if (splits == 1) {
    out->push_back(d);
    return {};
  }
  // Split: partials into the scratch buffer, then one merge per (query row, head).
  const size_t part_bytes = split_scratch_bytes(op, splits);
  if (!scratch_.buffer || scratch_.bytes < part_bytes) return make_error("split attention scratch was not prepared");
  Result<VkPipeline> split_pipe = pipelines_.get("attention", static_cast<uint32_t>(ct), ct == DType::F16, 1);
  if (!split_pipe) return split_pipe.error();
  Result<VkPipeline> merge_pipe = pipelines_.get("attention_combine", 0, false);
  if (!merge_pipe) return merge_pipe.error();
  const VkDescriptorBufferInfo part_info{scratch_.buffer, 0, part_bytes};
  const ByteRange part_range{scratch_.buffer, 0, part_bytes};
  int64_t span = op.ib.count;
  if (op.i3 > 0) span = std::min<int64_t>(span, op.i3);
  d.pipeline = *split_pipe;
  bind(&d, 0, VkDescriptorBufferInfo{});
  bind(&d, 2, part_info);
  d.pc.u0 = splits;
  d.pc.u1 = div_up(span, splits);
  d.groups[2] = splits;
  d.writes[0] = part_range;
  out->push_back(d);
  Dispatch m;
  m.pipeline = *merge_pipe;
  bind(&m, 0, dst.info);
  bind(&m, 1, part_info);
  m.pc.d_off = dst.off;
  m.pc.d_stride = dst.stride;
  m.pc.i0 = op.i0;
  m.pc.i2 = op.i2;
  m.pc.u0 = splits;
  m.groups[0] = static_cast<uint32_t>(n_heads);
  m.groups[1] = static_cast<uint32_t>(n_q);
  m.reads[0] = part_range;
  m.writes[0] = dst.range;
  out->push_back(m);
  return {};
}

Status OpPlanner::copy_rows(const Op& op, std::vector<Dispatch>* out) {
  const int64_t n = op.ia.count;
  if (n == 0 || op.src0.rows == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("copy_rows", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, n, 4));
  HEARTH_TRY_VIEW(src, view(op.src0, 0, op.src0.rows, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, src);
  d.pc.ne0 = static_cast<uint32_t>(op.dst.ne0);
  d.pc.rows = static_cast<uint32_t>(n);
  d.pc.ia_off = op.ia.offset;
  d.groups[0] = div_up(op.dst.ne0, kWg);
  d.groups[1] = static_cast<uint32_t>(n);
  d.reads[0] = src.range;
  d.writes[0] = dst.range;
  out->push_back(d);
  return {};
}

Status OpPlanner::moe_route(const Op& op, std::vector<Dispatch>* out) {
  const int64_t n = op.src0.rows;
  if (n == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("moe_route", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, n, 4));
  HEARTH_TRY_VIEW(logits, view(op.src0, 0, n, 4));
  HEARTH_TRY_VIEW(ids, view(op.src1, 0, n, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, logits);
  bind(&d, 2, ids);
  d.pc.ne0 = static_cast<uint32_t>(op.src0.ne0);
  d.pc.rows = static_cast<uint32_t>(n);
  d.pc.i0 = op.i0;
  d.pc.i1 = static_cast<int32_t>(op.dst.ne0);
  d.pc.f0 = op.f0;
  d.groups[0] = div_up(n, kWg);
  d.reads[0] = logits.range;
  d.writes[0] = dst.range;
  d.writes[1] = ids.range;
  out->push_back(d);
  return {};
}

// MatMulExperts: matmul_experts.comp in MatMul's lanes per row, so each output is MatMul's
// float. Decode (one token): a workgroup row per (token, rank) pair. Batches: moe_group.comp
// first sorts the pairs by expert into groups_, then each workgroup row takes a tile of up
// to 8 pairs of one expert, so an expert's rows are read once per 8 of its pairs. The
// stacked weights are bound in windows of whole experts that fit the storage-buffer range,
// one dispatch each (a pair whose expert lies in another window returns at once); tokens in
// chunks whose rows fit too and whose pairs or tiles fit the grid.
Status OpPlanner::matmul_experts(const Op& op, std::vector<Dispatch>* out) {
  const Tensor& w = op.src0;
  const int64_t n_tok = op.src2.rows, k = op.src2.ne0, n_out = op.dst.ne0;
  const int64_t n_expert = w.rows / n_out;
  if (n_tok == 0) return {};
  const bool grouped = group_bytes(op) > 0;
  const uint32_t tile = grouped ? kMatmulTokens : 1;
  const uint32_t lanes = matmul_lanes(w.ne0);
  const uint32_t rows_per_group = kWg / lanes;
  Result<VkPipeline> pipe = pipelines_.get("matmul_experts", static_cast<uint32_t>(w.type), false, tile, lanes);
  if (!pipe) return pipe.error();
  Result<VkPipeline> group_pipe = VK_NULL_HANDLE;
  if (grouped) {
    group_pipe = pipelines_.get("moe_group", 0, false);
    if (!group_pipe) return group_pipe.error();
    if (!groups_.buffer || groups_.bytes < group_bytes(op)) return make_error("the grouping scratch was not prepared");
  }
  const auto& lim = ctx_.props.limits.maxComputeWorkGroupCount;
  const int64_t experts_per_window = rows_per_window(w) / n_out;
  if (experts_per_window == 0) return make_error("one expert's matrix exceeds the device's storage buffer range");
  if (div_up(n_out, rows_per_group) > lim[0] || static_cast<int64_t>(lim[1]) <= n_expert + 1)
    return make_error("too many output rows or experts for the device's grid");
  const int64_t x_per_tok = op.i1 != 0 ? k : 1;
  // Tiles of a chunk: at most ceil(pairs / 8) + n_expert + 1 <= pairs + n_expert + 1.
  const int64_t grid_tokens = (static_cast<int64_t>(lim[1]) - (grouped ? n_expert + 1 : 0)) / k;
  const int64_t tok_chunk =
      std::max<int64_t>(1, std::min<int64_t>({rows_per_window(op.src1) / x_per_tok, rows_per_window(op.dst) / k,
                                              rows_per_window(op.src2), grid_tokens}));
  const VkDescriptorBufferInfo groups_info{groups_.buffer, 0, grouped ? group_bytes(op) : 0};
  const ByteRange groups_range{groups_.buffer, 0, grouped ? group_bytes(op) : 0};
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_chunk) {
    const int64_t t1 = std::min(n_tok, t0 + tok_chunk), pairs = (t1 - t0) * k;
    HEARTH_TRY_VIEW(x, view(op.src1, t0 * x_per_tok, t1 * x_per_tok, 4));
    HEARTH_TRY_VIEW(y, view(op.dst, t0 * k, t1 * k, 4));
    HEARTH_TRY_VIEW(ids, view(op.src2, t0, t1, 4));
    if (grouped) {
      Dispatch g;
      g.pipeline = *group_pipe;
      bind(&g, 0, groups_info);
      bind(&g, 3, ids);
      g.pc.rows = static_cast<uint32_t>(t1 - t0);
      g.pc.i0 = static_cast<int32_t>(k);
      g.pc.i1 = static_cast<int32_t>(n_expert);
      g.pc.u0 = tile;
      g.reads[0] = ids.range;
      g.writes[0] = groups_range;
      out->push_back(g);
    }
    for (int64_t e0 = 0; e0 < n_expert; e0 += experts_per_window) {
      const int64_t e1 = std::min(n_expert, e0 + experts_per_window);
      HEARTH_TRY_VIEW(wv, view(w, e0 * n_out, e1 * n_out, 1));
      Dispatch d;
      d.pipeline = *pipe;
      bind(&d, 0, y);
      bind(&d, 1, wv);
      bind(&d, 2, x);
      bind(&d, 3, ids);
      d.pc.ne0 = static_cast<uint32_t>(w.ne0);
      d.pc.rows = static_cast<uint32_t>(pairs);
      d.pc.n_ia = static_cast<uint32_t>(n_out);
      d.pc.i0 = static_cast<int32_t>(k);
      d.pc.i1 = static_cast<int32_t>(n_expert);
      d.pc.i2 = op.i1;
      d.pc.u0 = static_cast<uint32_t>(e0);
      d.pc.u1 = static_cast<uint32_t>(e1);
      d.groups[0] = div_up(n_out, rows_per_group);
      d.groups[1] = grouped ? div_up(pairs, tile) + static_cast<uint32_t>(n_expert + 1) : static_cast<uint32_t>(pairs);
      d.reads[0] = wv.range;
      d.reads[1] = x.range;
      d.reads[2] = ids.range;
      if (grouped) {
        bind(&d, 4, groups_info);
        d.reads[3] = groups_range;
      }
      d.writes[0] = y.range;
      out->push_back(d);
    }
  }
  return {};
}

Status OpPlanner::moe_combine(const Op& op, std::vector<Dispatch>* out) {
  const int64_t n = op.src1.rows, k = op.src1.ne0;
  if (n == 0 || op.dst.ne0 == 0) return {};
  Result<VkPipeline> pipe = pipelines_.get("moe_combine", 0, false);
  if (!pipe) return pipe.error();
  HEARTH_TRY_VIEW(dst, view(op.dst, 0, n, 4));
  HEARTH_TRY_VIEW(x, view(op.src0, 0, n * k, 4));
  HEARTH_TRY_VIEW(wt, view(op.src1, 0, n, 4));
  Dispatch d;
  d.pipeline = *pipe;
  bind(&d, 0, dst);
  bind(&d, 1, x);
  bind(&d, 2, wt);
  d.pc.ne0 = static_cast<uint32_t>(op.dst.ne0);
  d.pc.rows = static_cast<uint32_t>(n);
  d.pc.i0 = static_cast<int32_t>(k);
  d.groups[0] = div_up(op.dst.ne0, kWg);
  d.groups[1] = static_cast<uint32_t>(n);
  d.reads[0] = x.range;
  d.reads[1] = wt.range;
  d.writes[0] = dst.range;
  out->push_back(d);
  return {};
}

}  // namespace hearth::vulkan
