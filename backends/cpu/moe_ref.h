// Scalar references of the mixture-of-experts routing and combination (backends/backend.h:
// MoeRoute, MoeCombine), one token row at a time. The CPU backend runs these very
// functions (a few hundred flops a token: nothing to vectorise); the device backends are
// tested against them. Portable C++, reentrant.
#pragma once

#include <cstdint>

namespace hearth::cpu {

// MoeRoute for one token: logits [n_expert] -> ids [k] (descending probability, ties to the
// lower id, NaN as -inf) and weights [k] (renormalised over the k when renorm, the sum
// clamped below at min_sum). probs: scratch of n_expert floats.
void moe_route_row(const float* logits, int64_t n_expert, int64_t k, bool renorm, float min_sum, float* probs,
                   int32_t* ids, float* weights);

// MoeCombine for one token: y[0 .. d) = sum_j w[j] * x_j[0 .. d), x_j = x + j * x_stride
// floats, each product rounded, added in order j = 0 .. k-1.
void moe_combine_row(const float* x, int64_t x_stride, const float* w, int64_t k, int64_t d, float* y);

}  // namespace hearth::cpu
