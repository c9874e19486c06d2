#include "engine/sampling/params.h"

#include <string>

namespace hearth {
namespace {

// Written as !(lo <= x && x <= hi) so NaN fails too.
bool in_closed(float x, float lo, float hi) {
  return lo <= x && x <= hi;
}

Error range_error(const char* field, const char* range, float got) {
  return make_error(std::string("sampling: ") + field + " must be in " + range + ", got " + std::to_string(got));
}

}  // namespace

Status SamplingParams::validate() const {
  if (!in_closed(temperature, 0.0f, 100.0f)) return range_error("temperature", "[0, 100]", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return range_error("top_p", "(0, 1]", top_p);
  if (!in_closed(min_p, 0.0f, 1.0f)) return range_error("min_p", "[0, 1]", min_p);
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) {
    return range_error("repetition_penalty", "(0, 10]", repetition_penalty);
  }
  if (!in_closed(presence_penalty, -2.0f, 2.0f)) {
    return range_error("presence_penalty", "[-2, 2]", presence_penalty);
  }
  if (!in_closed(frequency_penalty, -2.0f, 2.0f)) {
    return range_error("frequency_penalty", "[-2, 2]", frequency_penalty);
  }
  if (penalty_last_n < -1) {
    return make_error("sampling: penalty_last_n must be >= -1 (-1 = all tokens), got " +
                      std::to_string(penalty_last_n));
  }
  return {};
}

}  // namespace hearth
