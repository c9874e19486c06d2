// The RoPE frequency formula, written once for every backend (Op::Rope in backend.h):
// theta_j = pos * f1 * base^(-2j / n_rot), computed as ggml does: theta starts at pos * f1
// and is multiplied in float by the ratio base^(-2 / n_rot) once per pair, so every backend
// that accumulates it this way from this ratio gets the CPU's angles bit for bit.
#pragma once

#include <cmath>

namespace hearth {

inline float rope_theta_ratio(float base, int n_rot) {
  return std::pow(base, -2.0f / static_cast<float>(n_rot));
}

}  // namespace hearth
