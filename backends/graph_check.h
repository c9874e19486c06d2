// The checks of backend.h's contract that do not depend on the device, written once and run
// by every backend before it executes a graph: each tensor is present, of an allowed type,
// whole blocks per row and inside its buffer; shapes agree; integer inputs lie inside
// Graph::ints and name rows that exist (token ids, KV slots, logit rows) or positions that
// are not negative; a destination does not overlap what the op reads, except the exact
// in-place use an op allows. What is left to a backend is what its device adds (alignment,
// storage ranges, head sizes its kernels handle).
#pragma once

#include "backends/backend.h"
#include "backends/device_caps.h"

namespace hearth {

const char* op_name(OpKind kind);

// Ok, or an error naming the first bad op: "op 12 (MatMul): src1.ne0 is 640, the weights' rows hold 512".
Status check_graph(const Graph& graph, const DeviceCaps& caps);

}  // namespace hearth
