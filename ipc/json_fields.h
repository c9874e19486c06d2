// JSON bodies as every API surface reads them: parsed with a depth limit, dumped without
// ever throwing on bad UTF-8, and a FieldReader that validates optional fields one by one,
// keeping the first error as an OpenAI-shaped ApiError (each surface writes it its own way).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/errors.h"
#include "ipc/http_types.h"

namespace hearth::ipc {

// Parses body as a JSON object. Errors (400, code "invalid_json"): not JSON, invalid
// UTF-8, nesting deeper than 64 levels, or not an object.
std::optional<ApiError> parse_json(std::string_view body, nlohmann::ordered_json* out);

// JSON dump that never throws on invalid UTF-8 (bytes are replaced with U+FFFD).
std::string dump_json(const nlohmann::ordered_json& j);

// A response with status and body as JSON (application/json).
HttpResponse json_response(int status, const nlohmann::ordered_json& body);

// "a string", "an integer", ... for error messages.
const char* type_name(const nlohmann::ordered_json& j);

// Reads optional fields of one JSON object, keeping the first error. A field that is
// absent or null is left at its default.
class FieldReader {
 public:
  explicit FieldReader(const nlohmann::ordered_json& obj) : obj_(obj) {}

  const std::optional<ApiError>& error() const { return error_; }

  // The field, or null when it is absent or null.
  const nlohmann::ordered_json* get(const char* key) const;
  // A number in [lo, hi] (lo itself excluded when lo_open).
  bool number(const char* key, double lo, double hi, bool lo_open, float* out);
  // An integer in [lo, hi]; a float with an integral value (2.0) is accepted.
  bool integer(const char* key, int64_t lo, int64_t hi, int64_t* out);
  bool boolean(const char* key, bool* out);
  // A string (any, "" included).
  bool string(const char* key, std::string* out);

  // Keeps e unless an error is kept already; false, for `return r.fail(...)`.
  bool fail(ApiError e);
  bool fail_type(const std::string& key, const char* want, const nlohmann::ordered_json& got);

 private:
  bool fail_range(const char* key, int64_t lo, int64_t hi);

  const nlohmann::ordered_json& obj_;
  std::optional<ApiError> error_;
};

}  // namespace hearth::ipc
