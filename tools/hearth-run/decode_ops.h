// hearth-run --bench --bench-ops: one decode step op by op, against the bytes each op
// moves and this machine's memory read peak, so the next change to decode starts from
// where the time goes (issue 43, item 2).
#pragma once

#include <nlohmann/json.hpp>

#include "run.h"

namespace hearth {

// Fills a fresh context with `context` random tokens (one prefill), runs `steps` decode
// steps unprofiled, then `steps` more with every op timed (backends/op_profile.h). JSON:
// {"context", "steps", "step_ms" (unprofiled mean), "profiled_step_ms", "step_bytes",
//  "ops": [{"group", "ops_per_step", "ms_per_step", "bytes_per_step"}...] largest first};
// null after an error (printed).
nlohmann::json profile_decode_ops(Loaded& l, int context, int steps, DType kv_type);

// The table of profile_decode_ops' result, each row's GB/s against `read_peak_gb_s`.
void print_decode_ops(const nlohmann::json& p, double read_peak_gb_s);

}  // namespace hearth
