// Shared by the reference tests against llama.cpp (reference_test.cpp for Gemma,
// chat_model_reference_test.cpp for the chat models): evaluating token ids, argmax, and the
// distance of our last-prompt logits from a fixture's (the scheme make_fixtures.py and
// make_chat_model_fixtures.py write: the largest logits plus every stride-th entry, with
// llama.cpp's std of the whole vector).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/model/context.h"

namespace hearth::test {

inline void eval_ok(InferenceContext& ctx, const std::vector<int32_t>& tokens, bool all_logits = false) {
  auto s = ctx.eval(tokens, all_logits);
  INFO((s.ok() ? std::string() : s.error().message));
  REQUIRE(s.ok());
}

inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

struct LogitError {
  double max_std;  // max |ours - llama.cpp| over the stored entries / llama.cpp's std
  double rms_std;  // root mean square of the difference over the every-stride-th sample / std
};

// `ref` is a fixture prompt with "last_logits" {std, top_ids, top_values, stride, stride_values}.
inline LogitError logit_error(const nlohmann::json& ref, std::span<const float> ours) {
  const nlohmann::json& l = ref["last_logits"];
  const double sd = l["std"].get<double>();
  double max_diff = 0, sum_sq = 0;
  const auto& top_ids = l["top_ids"];
  const auto& top_values = l["top_values"];
  for (size_t i = 0; i < top_ids.size(); ++i)
    max_diff = std::max(max_diff, std::abs(ours[top_ids[i].get<int>()] - top_values[i].get<double>()));
  const int stride = l["stride"].get<int>();
  const auto& sv = l["stride_values"];
  for (size_t i = 0; i < sv.size(); ++i) {
    const double d = ours[i * stride] - sv[i].get<double>();
    max_diff = std::max(max_diff, std::abs(d));
    sum_sq += d * d;
  }
  return {max_diff / sd, std::sqrt(sum_sq / static_cast<double>(sv.size())) / sd};
}

}  // namespace hearth::test
