#include "ipc/json_fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// nlohmann's parser is iterative, but a client's million-deep [[[[ is still pointless work
// and memory; API bodies are a few levels deep.
constexpr int kMaxJsonDepth = 64;

// Deepest nesting of [ and { outside strings; stops counting past limit.
int json_depth(std::string_view s, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

const char* type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

std::optional<ApiError> parse_json(std::string_view body, json* out) {
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return bad_request("the JSON body is nested more than 64 levels deep", "", "invalid_json");
  }
  try {
    *out = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    // nlohmann reports bad syntax and ill-formed UTF-8 alike.
    return bad_request(std::string("could not parse the JSON body: ") + e.what(), "", "invalid_json");
  }
  if (!out->is_object()) return bad_request("the JSON body must be an object", "", "invalid_json");
  return std::nullopt;
}

const json* FieldReader::get(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::number(const char* key, double lo, double hi, bool lo_open, float* out) {
  const json* j = get(key);
  if (j == nullptr || error_) return false;
  if (!j->is_number()) return fail_type(key, "a number", *j);
  const double v = j->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
    return fail(bad_request(std::string("'") + key + "' must be in " + (lo_open ? "(" : "[") + fmt(lo) + ", " +
                                fmt(hi) + "], got " + fmt(v),
                            key));
  }
  *out = static_cast<float>(v);
  return true;
}

bool FieldReader::integer(const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const json* j = get(key);
  if (j == nullptr || error_) return false;
  if (!j->is_number()) return fail_type(key, "an integer", *j);
  int64_t v = 0;
  if (j->is_number_unsigned()) {
    const uint64_t u = j->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return fail_range(key, lo, hi);
    v = static_cast<int64_t>(u);
  } else if (j->is_number_integer()) {
    v = j->get<int64_t>();
  } else {
    const double d = j->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return fail_type(key, "an integer", *j);
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) return fail_range(key, lo, hi);
    v = static_cast<int64_t>(d);
  }
  if (v < lo || v > hi) return fail_range(key, lo, hi);
  *out = v;
  return true;
}

bool FieldReader::boolean(const char* key, bool* out) {
  const json* j = get(key);
  if (j == nullptr || error_) return false;
  if (!j->is_boolean()) return fail_type(key, "a boolean", *j);
  *out = j->get<bool>();
  return true;
}

bool FieldReader::string(const char* key, std::string* out) {
  const json* j = get(key);
  if (j == nullptr || error_) return false;
  if (!j->is_string()) return fail_type(key, "a string", *j);
  *out = j->get<std::string>();
  return true;
}

bool FieldReader::fail(ApiError e) {
  if (!error_) error_ = std::move(e);
  return false;
}

bool FieldReader::fail_type(const std::string& key, const char* want, const json& got) {
  return fail(bad_request("'" + key + "' must be " + want + ", got " + type_name(got), key, "invalid_type"));
}

bool FieldReader::fail_range(const char* key, int64_t lo, int64_t hi) {
  return fail(bad_request(
      std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
      key));
}

}  // namespace hearth::ipc
