#include "engine/model/sampling_defaults.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/model/catalog.h"

namespace hearth {
namespace {

// Reads key into *out when the file has it as a number that fits; a value of another type
// or out of T's range is a warning.
template <class T>
void read_key(const gguf::File& f, const char* key, std::optional<T>* out, std::vector<std::string>* warnings) {
  if (!f.has(key)) return;
  if constexpr (std::is_integral_v<T>) {
    Result<int64_t> v = f.get_int(key);
    if (v && *v >= std::numeric_limits<T>::min() && *v <= std::numeric_limits<T>::max()) {
      *out = static_cast<T>(*v);
      return;
    }
    warnings->push_back(std::string(key) + ": " + (v ? "out of range" : v.error().message) + "; ignored");
  } else {
    Result<double> v = f.get_float(key);
    if (v && std::isfinite(*v)) {
      *out = static_cast<T>(*v);
      return;
    }
    warnings->push_back(std::string(key) + ": " + (v ? "not a finite number" : v.error().message) + "; ignored");
  }
}

// The field validate_defaults() rejects, cleared one at a time until the rest pass.
void drop_invalid(SamplingDefaults* d, std::vector<std::string>* warnings) {
  auto check = [&](auto SamplingDefaults::*field, const char* key) {
    SamplingDefaults one;
    one.*field = (*d).*field;
    if (Status s = validate_defaults(one); !s) {
      warnings->push_back(std::string(key) + ": " + s.error().message + "; ignored");
      (*d).*field = std::nullopt;
    }
  };
  check(&SamplingDefaults::temperature, "general.sampling.temp");
  check(&SamplingDefaults::top_k, "general.sampling.top_k");
  check(&SamplingDefaults::top_p, "general.sampling.top_p");
  check(&SamplingDefaults::min_p, "general.sampling.min_p");
  check(&SamplingDefaults::repetition_penalty, "general.sampling.penalty_repeat");
  check(&SamplingDefaults::penalty_last_n, "general.sampling.penalty_last_n");
}

}  // namespace

SamplingDefaults read_gguf_sampling(const gguf::File& f, std::vector<std::string>* warnings) {
  SamplingDefaults d;
  read_key(f, "general.sampling.temp", &d.temperature, warnings);
  read_key(f, "general.sampling.top_k", &d.top_k, warnings);
  read_key(f, "general.sampling.top_p", &d.top_p, warnings);
  read_key(f, "general.sampling.min_p", &d.min_p, warnings);
  read_key(f, "general.sampling.penalty_repeat", &d.repetition_penalty, warnings);
  read_key(f, "general.sampling.penalty_last_n", &d.penalty_last_n, warnings);
  drop_invalid(&d, warnings);
  return d;
}

ModelSampling model_sampling(const gguf::File& f, std::string_view catalog_name, std::vector<std::string>* warnings) {
  const SamplingDefaults file = read_gguf_sampling(f, warnings);
  ModelSampling catalog = catalog_sampling(catalog_name);
  // A file pulled from the Hub is named by its file, not the catalog: an architecture that
  // only one catalog family has names the family (qwen3 and qwen3moe: Qwen3's values).
  if (catalog.source.empty()) {
    const Result<std::string_view> arch = f.get_string("general.architecture");
    if (arch && (*arch == "qwen3" || *arch == "qwen3moe")) catalog = catalog_sampling("qwen3");
  }
  if (file.empty()) return catalog;
  ModelSampling m;
  m.defaults = file.or_else(catalog.defaults);
  m.source = m.defaults == file ? "gguf" : "gguf+catalog";
  // A file's keys come from generation_config.json, which holds one mode's values (Qwen3's:
  // thinking); the publisher's values for the other mode are the catalog's.
  if (catalog.no_thinking) m.no_thinking = catalog.no_thinking->or_else(m.defaults);
  return m;
}

}  // namespace hearth
