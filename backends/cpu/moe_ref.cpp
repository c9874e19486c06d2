#include "backends/cpu/moe_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hearth::cpu {

void moe_route_row(const float* logits, int64_t n_expert, int64_t k, bool renorm, float min_sum, float* probs,
                   int32_t* ids, float* weights) {
  // Softmax as ggml_soft_max computes it: subtract the max, exponentiate, scale by 1 / sum.
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t e = 0; e < n_expert; ++e)
    if (logits[e] > m) m = logits[e];
  float s = 0.0f;
  for (int64_t e = 0; e < n_expert; ++e) {
    probs[e] = std::exp(logits[e] - m);
    s += probs[e];
  }
  const float inv = 1.0f / s;
  for (int64_t e = 0; e < n_expert; ++e) probs[e] *= inv;

  // The k largest by a strict total order: probability descending (NaN lowest), then id.
  auto key = [&](int32_t e) { return std::isnan(probs[e]) ? -std::numeric_limits<float>::infinity() : probs[e]; };
  auto before = [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); };
  // Insertion into a sorted list of k: n_expert * k compares at most, no allocation.
  int64_t n = 0;
  for (int32_t e = 0; e < static_cast<int32_t>(n_expert); ++e) {
    if (n == k && !before(e, ids[k - 1])) continue;
    int64_t i = n < k ? n++ : k - 1;
    for (; i > 0 && before(e, ids[i - 1]); --i) ids[i] = ids[i - 1];
    ids[i] = e;
  }

  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) sum += probs[ids[j]];
  const float div = renorm ? std::max(sum, min_sum) : 1.0f;
  for (int64_t j = 0; j < k; ++j) weights[j] = renorm ? probs[ids[j]] / div : probs[ids[j]];
}

void moe_combine_row(const float* x, int64_t x_stride, const float* w, int64_t k, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * w[0];
  for (int64_t j = 1; j < k; ++j) {
    const float* xj = x + j * x_stride;
    const float wj = w[j];
    for (int64_t i = 0; i < d; ++i) {
      const float p = xj[i] * wj;  // rounded before the add (no fused multiply-add here)
      y[i] = y[i] + p;
    }
  }
}

}  // namespace hearth::cpu
