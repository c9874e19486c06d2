#include "backends/graph_check.h"

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace hearth {

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::GetRows:
      return "GetRows";
    case OpKind::RmsNorm:
      return "RmsNorm";
    case OpKind::MatMul:
      return "MatMul";
    case OpKind::Rope:
      return "Rope";
    case OpKind::Add:
      return "Add";
    case OpKind::AddRow:
      return "AddRow";
    case OpKind::Scale:
      return "Scale";
    case OpKind::GeluMul:
      return "GeluMul";
    case OpKind::SiluMul:
      return "SiluMul";
    case OpKind::Softcap:
      return "Softcap";
    case OpKind::StoreKv:
      return "StoreKv";
    case OpKind::Attention:
      return "Attention";
    case OpKind::CopyRows:
      return "CopyRows";
    case OpKind::MoeRoute:
      return "MoeRoute";
    case OpKind::MatMulExperts:
      return "MatMulExperts";
    case OpKind::MoeCombine:
      return "MoeCombine";
  }
  return "?";
}

namespace {

std::string num(int64_t v) {
  return std::to_string(v);
}

// The bytes [lo, hi) the first `rows` rows of t occupy; hi = lo when rows is 0.
struct Extent {
  const Buffer* buffer;
  size_t lo, hi;
};
Extent extent(const Tensor& t, int64_t rows) {
  if (rows <= 0) return {t.buffer, t.offset, t.offset};
  return {t.buffer, t.offset, t.offset + static_cast<size_t>(rows - 1) * t.row_stride + t.row_size()};
}
bool overlap(const Extent& a, const Extent& b) {
  return a.buffer == b.buffer && a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}
bool same_view(const Tensor& a, const Tensor& b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.row_stride == b.row_stride;
}

class Checker {
 public:
  Checker(const Graph& g, const DeviceCaps& caps) : g_(g), caps_(caps) {}

  Status op(const Op& op);

 private:
  // t is present, its rows hold whole blocks, and `rows` rows of it fit in its buffer.
  Status tensor(const Tensor& t, const char* what, int64_t rows) const {
    if (!t.valid()) return make_error(std::string(what) + " is missing");
    const DTypeInfo& info = dtype_info(t.type);
    if (info.block_elems <= 0 || !info.supported)
      return make_error(std::string(what) + " has type " + dtype_name(t.type) + ", which hearth does not compute with");
    if (t.ne0 < 0 || t.rows < 0 || t.ne0 % info.block_elems != 0)
      return make_error(std::string(what) + " has " + num(t.ne0) + " elements per row, not whole " +
                        dtype_name(t.type) + " blocks");
    if (rows > t.rows)
      return make_error(std::string(what) + " has " + num(t.rows) + " rows, the op needs " + num(rows));
    if (rows <= 0) return {};
    const size_t size = t.buffer->bytes(), row = t.row_size();
    const auto r = static_cast<size_t>(rows - 1);
    if (t.offset > size || row > size - t.offset || (r > 0 && (t.row_stride > (size - t.offset - row) / r)))
      return make_error(std::string(what) + ": " + num(rows) + " rows of " + std::to_string(row) + " bytes, " +
                        std::to_string(t.row_stride) + " apart from offset " + std::to_string(t.offset) +
                        ", do not fit in a buffer of " + std::to_string(size) + " bytes");
    return {};
  }
  Status f32(const Tensor& t, const char* what, int64_t rows) const {
    if (Status st = tensor(t, what, rows); !st) return st;
    if (t.type != DType::F32) return make_error(std::string(what) + " must be F32, not " + dtype_name(t.type));
    return {};
  }
  // Every value of s lies in [lo, hi). Spans already checked against a bound are not read again
  // (a batch's positions and KV slots are shared by every layer).
  Status ints(const IntSpan& s, const char* what, int64_t lo, int64_t hi) {
    if (static_cast<size_t>(s.offset) + s.count > g_.ints.size())
      return make_error(std::string(what) + " lie outside Graph::ints");
    for (const Checked& c : checked_)
      if (c.offset == s.offset && c.count == s.count && c.lo >= lo && c.hi <= hi) return {};
    for (int32_t v : g_.get(s))
      if (v < lo || v >= hi)
        return make_error(std::string(what) + " include " + num(v) + ", outside [" + num(lo) + ", " + num(hi) + ")");
    checked_.push_back({s.offset, s.count, lo, hi});
    return {};
  }
  // dst writes `rows` rows; it may equal src exactly when `in_place` (row-wise ops), never
  // overlap it otherwise.
  static Status apart(const Tensor& dst, int64_t dst_rows, const Tensor& src, int64_t src_rows, const char* what,
                      bool in_place) {
    if (!src.valid() || !overlap(extent(dst, dst_rows), extent(src, src_rows))) return {};
    if (in_place && same_view(dst, src)) return {};
    return make_error(std::string("dst overlaps ") + what);
  }
  // Expert ids: an I32 tensor (the one integer type ops read from a buffer) of `rows` rows.
  static Status ids(const Tensor& t, const char* what, int64_t rows) {
    if (!t.valid()) return make_error(std::string(what) + " is missing");
    if (t.type != DType::I32) return make_error(std::string(what) + " must be I32, not " + dtype_name(t.type));
    if (t.ne0 <= 0 || rows > t.rows)
      return make_error(std::string(what) + " has " + num(t.rows) + " rows of " + num(t.ne0) + ", the op needs " +
                        num(rows));
    const size_t size = t.buffer->bytes(), row = t.row_size();
    const auto r = static_cast<size_t>(std::max<int64_t>(rows, 1) - 1);
    if (t.offset > size || row > size - t.offset || (r > 0 && t.row_stride > (size - t.offset - row) / r))
      return make_error(std::string(what) + " does not fit in its buffer");
    return {};
  }
  Status weights(const Tensor& w, const char* what) const {
    if (Status st = tensor(w, what, w.rows); !st) return st;
    if (!caps_.supports_weight(w.type))
      return make_error(std::string(what) + " has type " + dtype_name(w.type) + ", which this backend does not run");
    return {};
  }
  Status caches(const Op& op) const {
    if (Status st = tensor(op.src2, "src2 (K cache)", op.src2.rows); !st) return st;
    if (Status st = tensor(op.src3, "src3 (V cache)", op.src3.rows); !st) return st;
    if (op.src2.type != op.src3.type || !caps_.supports_kv(op.src2.type))
      return make_error(std::string("the K and V caches must have one type this backend keeps KV in, not ") +
                        dtype_name(op.src2.type) + " and " + dtype_name(op.src3.type));
    if (overlap(extent(op.src2, op.src2.rows), extent(op.src3, op.src3.rows)))
      return make_error("the K and V caches overlap");
    return {};
  }

  Status get_rows(const Op& op);
  Status rms_norm(const Op& op) const;
  Status matmul(const Op& op) const;
  Status rope(const Op& op);
  Status elementwise(const Op& op) const;
  Status store_kv(const Op& op);
  Status attention(const Op& op);
  Status copy_rows(const Op& op);
  Status moe_route(const Op& op) const;
  Status matmul_experts(const Op& op) const;
  Status moe_combine(const Op& op) const;

  struct Checked {
    uint32_t offset, count;
    int64_t lo, hi;
  };
  const Graph& g_;
  const DeviceCaps& caps_;
  std::vector<Checked> checked_;
};

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

Status Checker::get_rows(const Op& op) {
  const int64_t n = op.ia.count;
  if (Status st = weights(op.src0, "src0 (table)"); !st) return st;
  if (Status st = f32(op.dst, "dst", n); !st) return st;
  if (op.dst.ne0 != op.src0.ne0)
    return make_error("dst rows hold " + num(op.dst.ne0) + " elements, the table's " + num(op.src0.ne0));
  if (Status st = ints(op.ia, "row ids", 0, op.src0.rows); !st) return st;
  return apart(op.dst, n, op.src0, op.src0.rows, "src0", false);
}

Status Checker::rms_norm(const Op& op) const {
  const int64_t rows = op.src0.rows;
  if (Status st = f32(op.src0, "src0", rows); !st) return st;
  if (Status st = f32(op.src1, "src1 (weight)", 1); !st) return st;
  if (Status st = f32(op.dst, "dst", rows); !st) return st;
  const int64_t chunk = op.src1.ne0;
  if (chunk <= 0 || op.src0.ne0 % chunk != 0)
    return make_error("src0 rows of " + num(op.src0.ne0) + " are not a multiple of the weight's " + num(chunk));
  if (op.dst.ne0 != op.src0.ne0) return make_error("dst and src0 rows differ in length");
  if (Status st = apart(op.dst, rows, op.src0, rows, "src0", true); !st) return st;
  return apart(op.dst, rows, op.src1, 1, "src1", false);
}

Status Checker::matmul(const Op& op) const {
  const int64_t n_tok = op.src1.rows;
  if (Status st = weights(op.src0, "src0 (weights)"); !st) return st;
  if (Status st = f32(op.src1, "src1", n_tok); !st) return st;
  if (Status st = f32(op.dst, "dst", n_tok); !st) return st;
  if (op.src1.ne0 != op.src0.ne0)
    return make_error("src1 rows hold " + num(op.src1.ne0) + " elements, the weights' rows " + num(op.src0.ne0));
  if (op.dst.ne0 != op.src0.rows)
    return make_error("dst rows hold " + num(op.dst.ne0) + " outputs, the weights have " + num(op.src0.rows) + " rows");
  if (Status st = apart(op.dst, n_tok, op.src0, op.src0.rows, "src0", false); !st) return st;
  return apart(op.dst, n_tok, op.src1, n_tok, "src1", false);
}

Status Checker::rope(const Op& op) {
  if (Status st = f32(op.dst, "dst", op.dst.rows); !st) return st;
  const int64_t head_dim = op.i0, n_rot = op.i1;
  if (head_dim <= 0 || op.dst.ne0 % head_dim != 0)
    return make_error("dst rows are not whole heads of " + num(head_dim));
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0)
    return make_error("rotated dims (" + num(n_rot) + ") must be even and <= head_dim");
  if (op.i2 != kRopeNormal && op.i2 != kRopeNeox) return make_error("unknown layout " + num(op.i2));
  if (static_cast<int64_t>(op.ia.count) != op.dst.rows) return make_error("one position per row is required");
  return ints(op.ia, "positions", 0, kIntMax);
}

Status Checker::elementwise(const Op& op) const {
  const bool binary =
      op.kind == OpKind::Add || op.kind == OpKind::AddRow || op.kind == OpKind::GeluMul || op.kind == OpKind::SiluMul;
  const int64_t rows = op.dst.rows;
  const int64_t src1_rows = op.kind == OpKind::AddRow ? 1 : rows;  // AddRow reads row 0 for every row
  if (Status st = f32(op.dst, "dst", rows); !st) return st;
  if (Status st = f32(op.src0, "src0", rows); !st) return st;
  if (op.src0.ne0 != op.dst.ne0) return make_error("src0 and dst rows differ in length");
  if (Status st = apart(op.dst, rows, op.src0, rows, "src0", true); !st) return st;
  if (!binary) return {};
  if (Status st = f32(op.src1, "src1", src1_rows); !st) return st;
  if (op.src1.ne0 != op.dst.ne0) return make_error("src1 and dst rows differ in length");
  return apart(op.dst, rows, op.src1, src1_rows, "src1", op.kind != OpKind::AddRow);
}

Status Checker::store_kv(const Op& op) {
  const int64_t n = op.ia.count;
  if (Status st = f32(op.src0, "src0 (keys)", n); !st) return st;
  if (Status st = f32(op.src1, "src1 (values)", n); !st) return st;
  if (Status st = caches(op); !st) return st;
  const int64_t ne0 = op.src0.ne0;
  if (op.src1.ne0 != ne0 || op.src2.ne0 != ne0 || op.src3.ne0 != ne0)
    return make_error("key, value and cache rows differ in length");
  if (Status st = ints(op.ia, "KV slots", 0, std::min(op.src2.rows, op.src3.rows)); !st) return st;
  for (const Tensor* c : {&op.src2, &op.src3})
    for (const Tensor* s : {&op.src0, &op.src1})
      if (Status st = apart(*c, c->rows, *s, n, "keys or values (as a cache)", false); !st) return st;
  return {};
}

Status Checker::attention(const Op& op) {
  const int64_t n_q = op.src0.rows;
  const int64_t n_heads = op.i0, n_kv_heads = op.i1, head_dim = op.i2;
  if (Status st = f32(op.src0, "src0 (queries)", n_q); !st) return st;
  if (Status st = f32(op.dst, "dst", n_q); !st) return st;
  if (Status st = caches(op); !st) return st;
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0)
    return make_error("n_heads (" + num(n_heads) + ") must be a positive multiple of n_kv_heads (" + num(n_kv_heads) +
                      ")");
  if (head_dim <= 0) return make_error("head_dim must be positive");
  if (op.src0.ne0 != n_heads * head_dim || op.dst.ne0 != n_heads * head_dim)
    return make_error("query and dst rows are not n_heads * head_dim");
  if (op.src2.ne0 != n_kv_heads * head_dim || op.src3.ne0 != n_kv_heads * head_dim)
    return make_error("cache rows are not n_kv_heads * head_dim");
  if (op.i3 < 0) return make_error("the sliding window must not be negative");
  if (static_cast<int64_t>(op.ia.count) != n_q) return make_error("one position per query row is required");
  if (n_q > 0 && op.ib.count == 0) return make_error("queries with no keys to attend to");
  if (Status st = ints(op.ia, "positions", 0, kIntMax); !st) return st;
  if (Status st = ints(op.ib, "KV slots", 0, std::min(op.src2.rows, op.src3.rows)); !st) return st;
  for (const auto& [t, rows, what] : {std::tuple{&op.src0, n_q, "src0"},
                                      {&op.src2, op.src2.rows, "the K cache"},
                                      {&op.src3, op.src3.rows, "the V cache"}})
    if (Status st = apart(op.dst, n_q, *t, rows, what, false); !st) return st;
  return {};
}

Status Checker::copy_rows(const Op& op) {
  const int64_t n = op.ia.count;
  if (Status st = f32(op.src0, "src0", op.src0.rows); !st) return st;
  if (Status st = f32(op.dst, "dst", n); !st) return st;
  if (op.src0.ne0 != op.dst.ne0) return make_error("src0 and dst rows differ in length");
  if (Status st = ints(op.ia, "row ids", 0, op.src0.rows); !st) return st;
  return apart(op.dst, n, op.src0, op.src0.rows, "src0", false);
}

Status Checker::moe_route(const Op& op) const {
  const int64_t n = op.src0.rows, k = op.dst.ne0;
  if (Status st = f32(op.src0, "src0 (router logits)", n); !st) return st;
  if (Status st = f32(op.dst, "dst (weights)", n); !st) return st;
  if (Status st = ids(op.src1, "src1 (expert ids)", n); !st) return st;
  if (k < 1 || k > op.src0.ne0)
    return make_error("k = " + num(k) + " experts per token, of " + num(op.src0.ne0) + " experts");
  if (op.src1.ne0 != k) return make_error("src1 (expert ids) rows hold " + num(op.src1.ne0) + " ids, dst " + num(k));
  if (op.i0 != 0 && op.i0 != 1) return make_error("i0 (renormalise) must be 0 or 1");
  if (Status st = apart(op.dst, n, op.src0, n, "src0", false); !st) return st;
  if (Status st = apart(op.src1, n, op.src0, n, "src0", false); !st) return st;
  return apart(op.dst, n, op.src1, n, "src1", false);
}

Status Checker::matmul_experts(const Op& op) const {
  const Tensor& w = op.src0;
  const int64_t n_tok = op.src2.rows, n_out = op.dst.ne0;
  if (Status st = weights(w, "src0 (stacked expert weights)"); !st) return st;
  if (Status st = ids(op.src2, "src2 (expert ids)", n_tok); !st) return st;
  const int64_t k = op.src2.ne0;
  if (n_out <= 0 || w.rows % n_out != 0)
    return make_error("src0 has " + num(w.rows) + " rows, not a whole number of experts of " + num(n_out));
  if (op.i1 != 0 && op.i1 != 1) return make_error("i1 (an input row per expert) must be 0 or 1");
  const int64_t x_rows = op.i1 != 0 ? n_tok * k : n_tok;
  if (Status st = f32(op.src1, "src1", x_rows); !st) return st;
  if (Status st = f32(op.dst, "dst", n_tok * k); !st) return st;
  if (op.src1.ne0 != w.ne0)
    return make_error("src1 rows hold " + num(op.src1.ne0) + " elements, the weights' rows " + num(w.ne0));
  for (const auto& [t, rows, what] :
       {std::tuple{&w, w.rows, "src0"}, {&op.src1, x_rows, "src1"}, {&op.src2, n_tok, "src2"}})
    if (Status st = apart(op.dst, n_tok * k, *t, rows, what, false); !st) return st;
  return {};
}

Status Checker::moe_combine(const Op& op) const {
  const int64_t n = op.src1.rows, k = op.src1.ne0;
  if (Status st = f32(op.src1, "src1 (weights)", n); !st) return st;
  if (Status st = f32(op.src0, "src0 (expert outputs)", n * k); !st) return st;
  if (Status st = f32(op.dst, "dst", n); !st) return st;
  if (k < 1) return make_error("no experts per token");
  if (op.dst.ne0 != op.src0.ne0) return make_error("src0 and dst rows differ in length");
  if (Status st = apart(op.dst, n, op.src0, n * k, "src0", false); !st) return st;
  return apart(op.dst, n, op.src1, n, "src1", false);
}

Status Checker::op(const Op& op) {
  switch (op.kind) {
    case OpKind::GetRows:
      return get_rows(op);
    case OpKind::RmsNorm:
      return rms_norm(op);
    case OpKind::MatMul:
      return matmul(op);
    case OpKind::Rope:
      return rope(op);
    case OpKind::Add:
    case OpKind::AddRow:
    case OpKind::Scale:
    case OpKind::GeluMul:
    case OpKind::SiluMul:
    case OpKind::Softcap:
      return elementwise(op);
    case OpKind::StoreKv:
      return store_kv(op);
    case OpKind::Attention:
      return attention(op);
    case OpKind::CopyRows:
      return copy_rows(op);
    case OpKind::MoeRoute:
      return moe_route(op);
    case OpKind::MatMulExperts:
      return matmul_experts(op);
    case OpKind::MoeCombine:
      return moe_combine(op);
  }
  return make_error("unknown op kind " + num(static_cast<int64_t>(op.kind)));
}

}  // namespace

Status check_graph(const Graph& graph, const DeviceCaps& caps) {
  Checker checker(graph, caps);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    if (Status st = checker.op(op); !st)
      return make_error("op " + std::to_string(i) + " (" + op_name(op.kind) + "): " + st.error().message);
  }
  return {};
}

}  // namespace hearth
