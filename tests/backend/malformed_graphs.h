// Graphs that break backend.h's contract, each beside the well-formed graph it was spoiled
// from, for running on every backend: the well-formed one runs, the spoiled one is an error
// (never a crash, never a write outside a tensor). Make is anything with
// `Tensor tensor(DType type, int64_t ne0, int64_t rows)` giving a tensor in a buffer of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace hearth::test {

struct GraphCase {
  std::string name;
  Graph good, bad;
};

namespace malformed_detail {

inline Graph one(Op op, const std::vector<int32_t>& ia, const std::vector<int32_t>& ib = {}) {
  Graph g;
  op.ia = g.add_ints(ia);
  op.ib = g.add_ints(ib);
  g.ops.push_back(op);
  return g;
}

}  // namespace malformed_detail

template <class Make>
std::vector<GraphCase> malformed_graphs(Make& make) {
  using malformed_detail::one;
  std::vector<GraphCase> cases;
  auto add = [&](std::string name, const Op& op, const std::vector<int32_t>& ia, const std::vector<int32_t>& ib,
                 const std::function<void(Graph&)>& spoil) {
    GraphCase c{std::move(name), one(op, ia, ib), one(op, ia, ib)};
    spoil(c.bad);
    cases.push_back(std::move(c));
  };

  {
    Op mm(OpKind::MatMul);
    mm.src0 = make.tensor(DType::F32, 32, 8);
    mm.src1 = make.tensor(DType::F32, 32, 4);
    mm.dst = make.tensor(DType::F32, 8, 4);
    const Tensor narrow = make.tensor(DType::F32, 16, 4);
    add("MatMul: src1 rows shorter than the weights' rows", mm, {}, {}, [&](Graph& g) { g.ops[0].src1 = narrow; });
    add("MatMul: dst rows shorter than the weights' row count", mm, {}, {}, [&](Graph& g) { g.ops[0].dst.ne0 = 4; });
    add("MatMul: no dst", mm, {}, {}, [](Graph& g) { g.ops[0].dst = Tensor{}; });
    add("MatMul: weights of a type no backend runs", mm, {}, {}, [](Graph& g) {
      g.ops[0].src0.type = DType::Q8_1;
      g.ops[0].src0.ne0 = 32;
    });
    add("MatMul: dst written over src1", mm, {}, {}, [](Graph& g) {
      Op& op = g.ops[0];
      op.dst = op.src1;
      op.dst.ne0 = 8;
    });
    add("MatMul: more token rows than src1's buffer holds", mm, {}, {}, [](Graph& g) {
      g.ops[0].src1.rows = 1000;
      g.ops[0].dst.rows = 1000;
    });
    add("MatMul: dst offset near SIZE_MAX", mm, {}, {},
        [](Graph& g) { g.ops[0].dst.offset = std::numeric_limits<size_t>::max() - 8; });
  }
  {
    Op gr(OpKind::GetRows);
    gr.src0 = make.tensor(DType::F32, 16, 10);
    gr.dst = make.tensor(DType::F32, 16, 3);
    gr.f0 = 1.0f;
    add("GetRows: a row id past the table", gr, {1, 9, 0}, {}, [](Graph& g) { g.ints[1] = 10; });
    add("GetRows: a negative row id", gr, {1, 9, 0}, {}, [](Graph& g) { g.ints[2] = -1; });
    add("GetRows: row ids outside Graph::ints", gr, {1, 9, 0}, {}, [](Graph& g) { g.ops[0].ia.count = 50; });
    add("GetRows: dst has fewer rows than ids", gr, {1, 9, 0}, {}, [](Graph& g) { g.ops[0].dst.rows = 2; });
  }
  {
    Op kv(OpKind::StoreKv);
    kv.src0 = make.tensor(DType::F32, 16, 2);
    kv.src1 = make.tensor(DType::F32, 16, 2);
    kv.src2 = make.tensor(DType::F16, 16, 8);
    kv.src3 = make.tensor(DType::F16, 16, 8);
    const Tensor f32_cache = make.tensor(DType::F32, 16, 8);
    add("StoreKv: a slot past the cache", kv, {3, 4}, {}, [](Graph& g) { g.ints[1] = 8; });
    add("StoreKv: K and V caches of different types", kv, {3, 4}, {}, [&](Graph& g) { g.ops[0].src3 = f32_cache; });
    add("StoreKv: K and V in one cache", kv, {3, 4}, {}, [](Graph& g) { g.ops[0].src3 = g.ops[0].src2; });
  }
  {
    Op at(OpKind::Attention);
    at.src0 = make.tensor(DType::F32, 32, 2);  // 2 heads of 16
    at.src2 = make.tensor(DType::F16, 16, 8);  // 1 KV head
    at.src3 = make.tensor(DType::F16, 16, 8);
    at.dst = make.tensor(DType::F32, 32, 2);
    at.i0 = 2;
    at.i1 = 1;
    at.i2 = 16;
    at.f0 = 0.25f;
    const std::vector<int32_t> pos{3, 4}, slots{0, 1, 2, 3, 4};
    add("Attention: a negative KV slot", at, pos, slots, [](Graph& g) { g.ints[2 + 3] = -1; });
    add("Attention: a KV slot past the cache", at, pos, slots, [](Graph& g) { g.ints[2 + 4] = 8; });
    add("Attention: a negative position", at, pos, slots, [](Graph& g) { g.ints[0] = -2; });
    add("Attention: heads not a multiple of KV heads", at, pos, slots, [](Graph& g) {
      g.ops[0].i1 = 2;
      g.ops[0].i2 = 8;
      g.ops[0].i0 = 3;
    });
    add("Attention: dst written over the queries", at, pos, slots, [](Graph& g) { g.ops[0].dst = g.ops[0].src0; });
    add("Attention: queries without keys", at, pos, slots, [](Graph& g) { g.ops[0].ib.count = 0; });
  }
  {
    Op rope(OpKind::Rope);
    rope.dst = make.tensor(DType::F32, 32, 2);
    rope.i0 = 16;
    rope.i1 = 16;
    rope.i2 = kRopeNeox;
    rope.f0 = 10000.0f;
    rope.f1 = 1.0f;
    add("Rope: odd rotated dims", rope, {0, 1}, {}, [](Graph& g) { g.ops[0].i1 = 15; });
    add("Rope: one position for two rows", rope, {0, 1}, {}, [](Graph& g) { g.ops[0].ia.count = 1; });
    add("Rope: an unknown layout", rope, {0, 1}, {}, [](Graph& g) { g.ops[0].i2 = 7; });
  }
  {
    Op addop(OpKind::Add);
    addop.src0 = make.tensor(DType::F32, 16, 4);
    addop.src1 = make.tensor(DType::F32, 16, 4);
    addop.dst = addop.src0;  // in place: allowed
    const Tensor wide = make.tensor(DType::F32, 32, 4);
    add("Add: dst overlapping src0 one row down", addop, {}, {}, [](Graph& g) {
      Op& op = g.ops[0];
      op.dst = op.src0.slice_rows(1, 3);
      op.src0.rows = 3;
      op.src1.rows = 3;
    });
    add("Add: src1 rows of another length", addop, {}, {}, [&](Graph& g) { g.ops[0].src1 = wide; });
  }
  {
    Op norm(OpKind::RmsNorm);
    norm.src0 = make.tensor(DType::F32, 32, 2);
    norm.src1 = make.tensor(DType::F32, 16, 1);
    norm.dst = make.tensor(DType::F32, 32, 2);
    norm.f0 = 1e-6f;
    const Tensor w12 = make.tensor(DType::F32, 12, 1);
    add("RmsNorm: rows not whole weight lengths", norm, {}, {}, [&](Graph& g) { g.ops[0].src1 = w12; });
  }
  {
    Op cr(OpKind::CopyRows);
    cr.src0 = make.tensor(DType::F32, 16, 5);
    cr.dst = make.tensor(DType::F32, 16, 2);
    add("CopyRows: a negative row id", cr, {4, 0}, {}, [](Graph& g) { g.ints[0] = -1; });
  }
  return cases;
}

}  // namespace hearth::test
