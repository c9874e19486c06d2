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
#include <functional>
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

// Teacher-forced logits: the row after `prompt` (it predicts gen[0]), then the rows of gen's
// tokens but the last (row i predicts gen[i + 1]).
inline std::vector<std::vector<float>> teacher_forced_rows(InferenceContext& ctx, const std::vector<int32_t>& prompt,
                                                           const std::vector<int32_t>& gen) {
  std::vector<std::vector<float>> rows;
  eval_ok(ctx, prompt);
  auto first = ctx.logits_row(0);
  rows.emplace_back(first.begin(), first.end());
  eval_ok(ctx, std::vector<int32_t>(gen.begin(), gen.end() - 1), true);
  for (size_t i = 0; i + 1 < gen.size(); ++i) {
    auto r = ctx.logits_row(static_cast<int64_t>(i));
    rows.emplace_back(r.begin(), r.end());
  }
  return rows;
}

// How far one KV type's logits move from another's (the base): per position, max |diff|
// and the rms of the difference over the whole vocabulary in units of the base row's std,
// the worst position kept; and where the greedy token differs, the base's top-2 gap there.
struct KvDrift {
  double max_std = 0, rms_std = 0;
  int compared = 0, differ = 0;
  double max_differ_gap = 0;  // the largest base top-2 gap where the greedy token differs
};

inline void add_drift(const std::vector<std::vector<float>>& base, const std::vector<std::vector<float>>& other,
                      KvDrift* d) {
  for (size_t i = 0; i < base.size(); ++i) {
    const std::vector<float>&b = base[i], &o = other[i];
    double mean = 0, var = 0, max_d = 0, sum_sq = 0;
    for (float x : b) mean += x;
    mean /= static_cast<double>(b.size());
    for (size_t v = 0; v < b.size(); ++v) {
      var += (b[v] - mean) * (b[v] - mean);
      const double diff = double(o[v]) - b[v];
      max_d = std::max(max_d, std::abs(diff));
      sum_sq += diff * diff;
    }
    const double sd = std::sqrt(var / static_cast<double>(b.size()));
    d->max_std = std::max(d->max_std, max_d / sd);
    d->rms_std = std::max(d->rms_std, std::sqrt(sum_sq / static_cast<double>(b.size())) / sd);
    ++d->compared;
    if (argmax(b) != argmax(o)) {
      std::vector<float> top(b);
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      ++d->differ;
      d->max_differ_gap = std::max(d->max_differ_gap, double(top[0]) - top[1]);
    }
  }
}

}  // namespace hearth::test
