#include "engine/sampling/defaults.h"

#include <cstdio>

namespace hearth {
namespace {

std::string fields_text(const SamplingDefaults& d) {
  std::string out;
  auto add = [&out](const char* name, const auto& v) {
    if (!v) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %g", out.empty() ? "" : ", ", name, static_cast<double>(*v));
    out += buf;
  };
  add("temperature", d.temperature);
  add("top_k", d.top_k);
  add("top_p", d.top_p);
  add("min_p", d.min_p);
  add("repetition_penalty", d.repetition_penalty);
  add("penalty_last_n", d.penalty_last_n);
  return out;
}

}  // namespace

std::string describe_defaults(const ModelSampling& m) {
  if (m.defaults.empty()) return "none";
  std::string out = fields_text(m.defaults) + " (" + m.source + ")";
  if (m.no_thinking) out += "; without thinking: " + fields_text(*m.no_thinking);
  return out;
}

SamplingDefaults SamplingDefaults::or_else(const SamplingDefaults& fallback) const {
  SamplingDefaults d = *this;
  if (!d.temperature) d.temperature = fallback.temperature;
  if (!d.top_k) d.top_k = fallback.top_k;
  if (!d.top_p) d.top_p = fallback.top_p;
  if (!d.min_p) d.min_p = fallback.min_p;
  if (!d.repetition_penalty) d.repetition_penalty = fallback.repetition_penalty;
  if (!d.penalty_last_n) d.penalty_last_n = fallback.penalty_last_n;
  return d;
}

SamplingParams with_model_defaults(SamplingParams p, uint32_t given, const SamplingDefaults& m) {
  if ((given & kSetTemperature) && p.temperature <= 0.0f) return p;
  auto take = [given](uint32_t bit, const auto& value, auto* field) {
    if (!(given & bit) && value) *field = *value;
  };
  take(kSetTemperature, m.temperature, &p.temperature);
  take(kSetTopK, m.top_k, &p.top_k);
  take(kSetTopP, m.top_p, &p.top_p);
  take(kSetMinP, m.min_p, &p.min_p);
  take(kSetRepetitionPenalty, m.repetition_penalty, &p.repetition_penalty);
  take(kSetPenaltyLastN, m.penalty_last_n, &p.penalty_last_n);
  return p;
}

Status validate_defaults(const SamplingDefaults& d) {
  // The defaults over an all-default request: every field the model sets is checked.
  return with_model_defaults(SamplingParams{}, 0, d).validate();
}

}  // namespace hearth
