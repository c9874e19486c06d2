// Where the time of a forward pass goes, op by op, against the bytes each op moves: the
// first question of a memory-bound decode step ("which ops read slower than the machine
// can read?"). ProfilingBackend wraps any backend and, while recording, runs each op of a
// graph as a graph of its own and times it; op_bytes() counts what the op must move at
// least (weights, KV entries, activations read and written). Ops are grouped by kind and,
// for MatMul and GetRows, by weight type and shape, so the 18 layers' Q projections are one
// row and the output projection another.
//
// The timing costs a graph check and a return to the caller per op (a few microseconds):
// compare the sum of the ops with an unprofiled step, which hearth-run --bench-ops prints
// beside it. Results are the same bits as without the wrapper (the same ops, in order).
//
// Thread-safety: as the wrapped backend (one engine thread).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace hearth {

// Bytes the op reads and writes at least: every source tensor's rows once (for MatMul the
// whole weight matrix, for GetRows only the rows looked up, for Attention the K and V rows
// of the positions the queries see: all of them, or the last window), and dst once.
double op_bytes(const Op& op, const Graph& g);

// The row an op is counted in: "MatMul q8_0 262144x640", "Attention", "RmsNorm", ...
std::string op_group(const Op& op);

struct OpProfileRow {
  std::string group;
  int64_t ops = 0;     // ops counted, over every recorded graph
  double seconds = 0;  // their time
  double bytes = 0;    // their op_bytes
};

class ProfilingBackend : public Backend {
 public:
  // `inner` outlives this wrapper.
  explicit ProfilingBackend(Backend& inner) : inner_(inner) {}

  // While recording, execute() times every op; otherwise it forwards the whole graph.
  void set_recording(bool on) { recording_ = on; }
  // Rows by time, largest first; graphs recorded so far.
  std::vector<OpProfileRow> rows() const;
  int64_t graphs() const { return graphs_; }
  void reset() { rows_.clear(), graphs_ = 0; }

  DeviceInfo info() const override { return inner_.info(); }
  Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind kind) override { return inner_.alloc(bytes, kind); }
  Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) override {
    return inner_.upload_weights(host, bytes);
  }
  Status prepare_matmul_weights(std::span<const Tensor> weights, bool host_droppable) override {
    return inner_.prepare_matmul_weights(weights, host_droppable);
  }
  const DeviceCaps& caps() const override { return inner_.caps(); }
  Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    return inner_.write(dst, offset, src, bytes);
  }
  Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) override {
    return inner_.read(src, offset, dst, bytes);
  }
  Status copy(std::span<const BufferCopy> copies) override { return inner_.copy(copies); }
  Status execute(const Graph& graph) override;

 private:
  Backend& inner_;
  bool recording_ = false;
  int64_t graphs_ = 0;
  std::map<std::string, OpProfileRow> rows_;
};

}  // namespace hearth
