#include "engine/sampling/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

namespace hearth {

namespace {

// Ordered: the grammar writes an object's properties in the order the schema declares them.
using json = nlohmann::ordered_json;

constexpr std::array kRefused = {
    "not",          "if",       "then",        "else",        "dependentRequired", "dependentSchemas",
    "dependencies", "contains", "minContains", "maxContains", "additionalItems",   "$dynamicRef",
    "$recursiveRef"};
constexpr std::array kFormats = {
    "date", "time", "date-time",     "duration",     "email", "hostname",     "ipv4",
    "ipv6", "uri",  "uri-reference", "uri-template", "uuid",  "json-pointer", "relative-json-pointer"};
// Keywords whose value is a schema, an array of schemas, or a map of names to schemas.
constexpr std::array kSchemaValued = {"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
                                      "propertyNames"};
constexpr std::array kSchemaArrays = {"anyOf", "allOf", "prefixItems"};
constexpr std::array kSchemaMaps = {"properties", "patternProperties", "$defs", "definitions"};

template <size_t N>
bool in(const std::array<const char*, N>& list, std::string_view key) {
  return std::any_of(list.begin(), list.end(), [&](const char* k) { return key == k; });
}

// JSON Pointer escaping of one reference token.
std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

bool declares_type(const json& s, const char* type) {
  const auto t = s.find("type");
  if (t == s.end()) return false;
  if (t->is_string()) return *t == type;
  return t->is_array() && std::find(t->begin(), t->end(), type) != t->end();
}

// The keyword of s (itself, not its subschemas) the grammar cannot enforce; "" if none.
std::string refused_here(const json& s) {
  for (const auto& [key, value] : s.items()) {
    if (in(kRefused, key)) return key;
    if (key == "oneOf") return "oneOf";
    if (key == "uniqueItems" && value == true) return key;
    if (key == "allOf" && value.is_array() && value.size() > 1) return key;
    if (key == "format" && value.is_string() && !in(kFormats, value.get<std::string>()))
      return "format \"" + value.get<std::string>() + "\"";
    if (key == "multipleOf" && !declares_type(s, "integer")) return key;
    // The grammar enforces a string's pattern or format, or its length, not both.
    if ((key == "minLength" || key == "maxLength") && (s.contains("pattern") || s.contains("format")))
      return key + " with " + (s.contains("pattern") ? "pattern" : "format");
  }
  return "";
}

// Calls visit(schema, pointer) on s and every subschema it holds, depth first; stops at the
// first non-empty answer and returns it.
template <class Visit>
std::string walk(const json& s, const std::string& at, Visit& visit) {
  if (!s.is_object()) return "";
  if (std::string found = visit(s, at); !found.empty()) return found;
  for (const auto& [key, value] : s.items()) {
    const std::string here = at + "/" + escape_token(key);
    std::string found;
    if (in(kSchemaValued, key)) {
      found = walk(value, here, visit);
    } else if (in(kSchemaArrays, key) && value.is_array()) {
      for (size_t i = 0; i < value.size() && found.empty(); ++i)
        found = walk(value[i], here + "/" + std::to_string(i), visit);
    } else if (in(kSchemaMaps, key) && value.is_object()) {
      for (const auto& [name, sub] : value.items()) {
        found = walk(sub, here + "/" + escape_token(name), visit);
        if (!found.empty()) break;
      }
    }
    if (!found.empty()) return found;
  }
  return "";
}

std::string first_unsupported(const json& schema) {
  auto visit = [](const json& s, const std::string& at) -> std::string {
    const std::string k = refused_here(s);
    return k.empty() ? "" : "'" + k + "' at " + (at.empty() ? "/" : at);
  };
  return walk(schema, "", visit);
}

bool is_object_schema(const json& s) {
  return declares_type(s, "object") || s.contains("properties") || s.contains("required");
}

// A string bounded by minLength / maxLength (and nothing else) as a pattern of that many
// characters: the grammar's own bounded strings let raw control characters through, which
// JSON forbids, while a pattern's characters never include what a JSON string must escape.
void bound_string_as_pattern(json& s) {
  if (s.contains("pattern") || s.contains("format")) return;
  const auto min = s.find("minLength"), max = s.find("maxLength");
  const bool has_min = min != s.end() && min->is_number_unsigned();
  const bool has_max = max != s.end() && max->is_number_unsigned();
  if (!has_min && !has_max) return;
  const std::string lo = has_min ? std::to_string(min->get<uint64_t>()) : "0";
  const std::string hi = has_max ? std::to_string(max->get<uint64_t>()) : "";
  s["pattern"] = "^[^\"\\\\\\x00-\\x1f]{" + lo + "," + hi + "}$";
  s.erase("minLength");
  s.erase("maxLength");
}

// See schema_for_grammar: open what says nothing of its members.
void open_free_form(json& s) {
  if (!s.is_object()) return;
  bound_string_as_pattern(s);
  if (is_object_schema(s) && !s.contains("properties") && !s.contains("patternProperties") &&
      !s.contains("additionalProperties") && !s.contains("unevaluatedProperties"))
    s["additionalProperties"] = true;
  if (declares_type(s, "array") && !s.contains("items") && !s.contains("prefixItems") &&
      !s.contains("unevaluatedItems"))
    s["items"] = true;
  for (auto& [key, value] : s.items()) {
    if (in(kSchemaValued, key)) {
      open_free_form(value);
    } else if (in(kSchemaArrays, key) && value.is_array()) {
      for (json& v : value) open_free_form(v);
    } else if (in(kSchemaMaps, key) && value.is_object()) {
      for (auto& [name, sub] : value.items()) open_free_form(sub);
    }
  }
}

}  // namespace

std::string unsupported_schema_keyword(std::string_view schema) {
  const json j = json::parse(schema, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? "" : first_unsupported(j);
}

Result<std::string> schema_for_grammar(std::string_view schema) {
  json j = json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("the schema is not valid JSON");
  if (j == true) j = json::object();
  if (!j.is_object()) return make_error("a schema must be a JSON object");
  if (std::string k = first_unsupported(j); !k.empty())
    return make_error("the schema uses " + k + ", which hearth cannot enforce while generating");
  open_free_form(j);
  return j.dump();
}

}  // namespace hearth
