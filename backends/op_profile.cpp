#include "backends/op_profile.h"

#include <algorithm>
#include <chrono>

#include "backends/graph_check.h"

namespace hearth {
namespace {

double tensor_bytes(const Tensor& t) {
  return t.valid() ? static_cast<double>(t.rows) * static_cast<double>(t.row_size()) : 0.0;
}

// Attention reads the K and V rows of the positions its queries see: for queries at
// positions [p_min, p_max], positions [p_min - window + 1, p_max] with a sliding window,
// else [0, p_max]; never past the n_kv positions the slot map names.
double attention_kv_bytes(const Op& op, const Graph& g) {
  const std::span<const int32_t> pos = g.get(op.ia);
  const int64_t n_kv = op.ib.count;
  if (pos.empty() || n_kv == 0) return 0;
  const auto [lo_it, hi_it] = std::minmax_element(pos.begin(), pos.end());
  const int64_t hi = std::min<int64_t>(*hi_it, n_kv - 1);
  const int64_t lo = op.i3 > 0 ? std::max<int64_t>(0, *lo_it - op.i3 + 1) : 0;
  const double n = static_cast<double>(std::max<int64_t>(0, hi - lo + 1));
  return n * static_cast<double>(op.src2.row_size() + op.src3.row_size());
}

}  // namespace

double op_bytes(const Op& op, const Graph& g) {
  const double dst = tensor_bytes(op.dst);
  switch (op.kind) {
    case OpKind::GetRows:  // the rows looked up, not the table
      return static_cast<double>(op.ia.count) * static_cast<double>(op.src0.row_size()) + dst;
    case OpKind::CopyRows:
      return 2.0 * static_cast<double>(op.ia.count) * static_cast<double>(op.src0.row_size());
    case OpKind::StoreKv:  // new rows read, written into the cache in its type
      return tensor_bytes(op.src0) + tensor_bytes(op.src1) +
             static_cast<double>(op.ia.count) * static_cast<double>(op.src2.row_size() + op.src3.row_size());
    case OpKind::Attention:
      return tensor_bytes(op.src0) + attention_kv_bytes(op, g) + dst;
    case OpKind::MatMulExperts: {  // the chosen experts' matrices: k of them for one token,
      // at most every expert for a batch (an upper bound: the ids are on the device)
      const int64_t n_out = op.dst.ne0, n_expert = n_out > 0 ? op.src0.rows / n_out : 0;
      const int64_t chosen = std::min(n_expert, op.src2.rows * op.src2.ne0);
      return static_cast<double>(chosen * n_out) * static_cast<double>(op.src0.row_size()) + tensor_bytes(op.src1) +
             tensor_bytes(op.src2) + dst;
    }
    default:  // MatMul (the whole weight matrix), norms, RoPE (in place: dst), elementwise
      return tensor_bytes(op.src0) + tensor_bytes(op.src1) + dst;
  }
}

std::string op_group(const Op& op) {
  std::string s = op_name(op.kind);
  if (op.kind == OpKind::MatMul || op.kind == OpKind::GetRows)
    s += std::string(" ") + dtype_name(op.src0.type) + " " + std::to_string(op.src0.rows) + "x" +
         std::to_string(op.src0.ne0);
  return s;
}

Status ProfilingBackend::execute(const Graph& graph) {
  if (!recording_) return inner_.execute(graph);
  using Clock = std::chrono::steady_clock;
  Graph one;
  one.ints = graph.ints;  // the ops' IntSpans index these
  for (const Op& op : graph.ops) {
    one.ops.assign(1, op);
    const Clock::time_point t0 = Clock::now();
    if (Status st = inner_.execute(one); !st) return st;
    OpProfileRow& r = rows_[op_group(op)];
    r.ops += 1;
    r.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    r.bytes += op_bytes(op, graph);
  }
  ++graphs_;
  return {};
}

std::vector<OpProfileRow> ProfilingBackend::rows() const {
  std::vector<OpProfileRow> out;
  for (const auto& [group, r] : rows_) {
    out.push_back(r);
    out.back().group = group;
  }
  std::sort(out.begin(), out.end(), [](const OpProfileRow& a, const OpProfileRow& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace hearth
