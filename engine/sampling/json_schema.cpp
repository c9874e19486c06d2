#include "engine/sampling/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

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

// Counted repeats (a{n}, and a string's minLength / maxLength, which become one). The
// grammar library spells a repeat of up to 128 out in full; past 128 it takes another path,
// which on the chat models' vocabularies (Qwen2.5's, SmolLM2's) fails its own check at
// once, and on small vocabularies compiles in time quadratic in the count (minLength 3,666
// took schema_fuzz over 30 s). Spelled-out repeats cost too: a string of maxLength 128
// compiles in about 1 s on Qwen2.5's vocabulary, holding the one compile a daemon runs at a
// time. So: no count over kMaxCount, no pattern whose repeats add over kMaxSpelled characters
// (nested groups multiplied), and no schema whose repeats, each squared, sum past
// kMaxSpelled squared.
//
// Quantifiers cost too, most where what they repeat is broad: the grammar's token masks
// follow every way a token can split across a run of them, so the cost grows about with
// their square. On Qwen2.5's vocabulary ^(.+)?(.+)?...$ with 8 groups (16 quantifiers) took
// 2.2 s to compile, and 100 groups of ([a-z]+|[0-9]*)? 99 s. So: no pattern with over
// kMaxQuantifiers quantifiers (a group's counted once per repeat of it), and no schema whose
// patterns' quantifiers, each pattern's count squared, sum past kMaxQuantifierSquares.
constexpr uint64_t kMaxCount = 128;
constexpr uint64_t kMaxSpelled = 500;
constexpr uint64_t kMaxQuantifiers = 16;
constexpr uint64_t kMaxQuantifierSquares = 4 * kMaxQuantifiers * kMaxQuantifiers;
constexpr uint64_t kSaturated = kMaxSpelled + 1;

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return std::min<uint64_t>(a + b, kSaturated);
}
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return a == 0 || b == 0 ? 0 : a > kSaturated / b ? kSaturated : std::min(a * b, kSaturated);
}

// A quantifier {n}, {n,} or {n,m} at p[i] ('{'): its largest count (n when unbounded) and
// the index past it; nullopt when p[i] starts no quantifier (a literal '{').
std::optional<std::pair<uint64_t, size_t>> quantifier_at(std::string_view p, size_t i) {
  uint64_t count[2] = {0, 0};
  int part = 0;
  bool digits[2] = {false, false};
  for (size_t j = i + 1; j < p.size(); ++j) {
    const char c = p[j];
    if (c >= '0' && c <= '9') {
      count[part] = saturating_add(saturating_mul(count[part], 10), static_cast<uint64_t>(c - '0'));
      digits[part] = true;
    } else if (c == ',' && part == 0 && digits[0]) {
      part = 1;
    } else if (c == '}' && digits[0]) {
      return std::make_pair(part == 1 && digits[1] ? std::max(count[0], count[1]) : count[0], j + 1);
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

struct PatternRepeats {
  uint64_t spelled = 0;      // characters the repeats add, nested groups multiplied (up to kSaturated)
  uint64_t largest = 0;      // the largest count of one quantifier (up to kSaturated)
  uint64_t quantifiers = 0;  // *, +, ? and {n,m}, nested groups multiplied (up to kSaturated)
};

// What an atom or a group holds: characters written and quantifiers.
struct PatternSize {
  uint64_t chars = 0, quantifiers = 0;
  void add(PatternSize o) {
    chars = saturating_add(chars, o.chars);
    quantifiers = saturating_add(quantifiers, o.quantifiers);
  }
};

// A pattern's repeats: a group's repeat counts its content that many times ((a{50}){50}
// adds 2,499 characters to the one written, (a?){10} has 11 quantifiers). Characters written
// once (a long alternation of words) cost the grammar nothing like a repeat and are not
// counted. A ? after a quantifier (lazy) or after '(' (a group's kind) is no quantifier.
PatternRepeats pattern_repeats(std::string_view p) {
  PatternRepeats r;
  std::vector<PatternSize> groups{{}};  // the size of each open group so far
  PatternSize last;                     // of the atom a quantifier would apply to
  bool after_quantifier = false;
  auto quantified = [&](uint64_t extra_chars, uint64_t extra_quantifiers) {
    const PatternSize extra{extra_chars, saturating_add(extra_quantifiers, 1)};
    groups.back().add(extra);
    last.add(extra);
    r.spelled = saturating_add(r.spelled, extra.chars);
    r.quantifiers = saturating_add(r.quantifiers, extra.quantifiers);
    after_quantifier = true;
  };
  std::optional<std::pair<uint64_t, size_t>> quantifier;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (after_quantifier && c == '?') {  // lazy: the same language
      after_quantifier = false;
      continue;
    }
    after_quantifier = false;
    if (c == '\\' || c == '[') {  // an escape or a class: one character
      if (c == '\\') {
        ++i;
      } else {
        size_t j = i + 1;
        if (j < p.size() && p[j] == '^') ++j;
        if (j < p.size() && p[j] == ']') ++j;
        for (; j < p.size() && p[j] != ']'; ++j)
          if (p[j] == '\\') ++j;
        i = j;
      }
      last = {1, 0};
      groups.back().add(last);
    } else if (c == '(') {
      groups.emplace_back();
      last = {};
      if (i + 1 < p.size() && p[i + 1] == '?')
        i += i + 2 < p.size() && std::string_view(":=!").find(p[i + 2]) != std::string_view::npos ? 2 : 1;
    } else if (c == ')' && groups.size() > 1) {
      last = groups.back();
      groups.pop_back();
      groups.back().add(last);
    } else if (c == '{' && (quantifier = quantifier_at(p, i))) {
      const auto [n, end] = *quantifier;
      r.largest = std::max(r.largest, n);
      const uint64_t more = n > 0 ? n - 1 : 0;
      quantified(saturating_mul(last.chars, more), saturating_mul(last.quantifiers, more));
      i = end - 1;
    } else if (c == '*' || c == '+' || c == '?') {
      quantified(0, 0);
    } else if (c == '|' || c == '^' || c == '$') {
      last = {};
    } else {
      last = {1, 0};
      groups.back().add(last);
    }
  }
  return r;
}

// What is wrong with a pattern's repeats ("what" names it), or "".
std::string pattern_too_long(const std::string& what, std::string_view pattern) {
  const PatternRepeats r = pattern_repeats(pattern);
  if (r.largest > kMaxCount)
    return what + " with a repeat over " + std::to_string(kMaxCount) + " (hearth enforces up to " +
           std::to_string(kMaxCount) + ")";
  if (r.spelled > kMaxSpelled)
    return what + " whose repeats add over " + std::to_string(kMaxSpelled) + " characters (hearth enforces up to " +
           std::to_string(kMaxSpelled) + ")";
  if (r.quantifiers > kMaxQuantifiers)
    return what + " with " +
           (r.quantifiers >= kSaturated ? "over " + std::to_string(kSaturated - 1) : std::to_string(r.quantifiers)) +
           " quantifiers (*, +, ? or {n,m}, counted once per repeat of their group; hearth enforces up to " +
           std::to_string(kMaxQuantifiers) + ")";
  return "";
}

// A repeat of s's keyword `key` past the bounds above: its description, or "".
std::string too_many_repeats(const std::string& key, const json& value) {
  if ((key == "minLength" || key == "maxLength") && value.is_number_unsigned() && value.get<uint64_t>() > kMaxCount)
    return key + " " + std::to_string(value.get<uint64_t>()) + " (hearth enforces up to " + std::to_string(kMaxCount) +
           ")";
  if (key == "pattern" && value.is_string()) return pattern_too_long("pattern", value.get<std::string>());
  if (key == "patternProperties" && value.is_object())
    for (const auto& [name, sub] : value.items())
      if (std::string found = pattern_too_long("patternProperties name", name); !found.empty()) return found;
  return "";
}

// The keyword of s (itself, not its subschemas) the grammar cannot enforce; "" if none.
std::string refused_here(const json& s) {
  for (const auto& [key, value] : s.items()) {
    if (std::string too_many = too_many_repeats(key, value); !too_many.empty()) return too_many;
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

// The repeats of s's own patterns (its pattern and its patternProperties names).
std::vector<PatternRepeats> patterns_here(const json& s) {
  std::vector<PatternRepeats> out;
  if (const auto p = s.find("pattern"); p != s.end() && p->is_string())
    out.push_back(pattern_repeats(p->get<std::string>()));
  if (const auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object())
    for (const auto& [name, sub] : pp->items()) out.push_back(pattern_repeats(name));
  return out;
}

// The larger of s's own length bounds (0 when it has none), at most kSaturated.
uint64_t length_bound(const json& s) {
  uint64_t length = 0;
  for (const char* key : {"minLength", "maxLength"})
    if (const auto v = s.find(key); v != s.end() && v->is_number_unsigned())
      length = std::max(length, std::min<uint64_t>(v->get<uint64_t>(), kSaturated));
  return length;
}

std::string first_unsupported(const json& schema) {
  auto visit = [](const json& s, const std::string& at) -> std::string {
    const std::string k = refused_here(s);
    return k.empty() ? "" : "'" + k + "' at " + (at.empty() ? "/" : at);
  };
  if (std::string found = walk(schema, "", visit); !found.empty()) return found;
  // Each repeat's compile costs about its length squared, each pattern's about its
  // quantifiers squared: bound the whole schema's too (ten strings of 500 characters
  // compile ten times as long as one).
  uint64_t squares = 0, quantifier_squares = 0;
  auto add = [&](const json& s, const std::string&) -> std::string {
    const uint64_t length = length_bound(s);
    squares += length * length;
    for (const PatternRepeats& r : patterns_here(s)) {
      squares += r.spelled * r.spelled;
      quantifier_squares += r.quantifiers * r.quantifiers;
    }
    return "";
  };
  walk(schema, "", add);
  if (squares > kMaxSpelled * kMaxSpelled)
    return "'string lengths and pattern repeats whose squares sum to " + std::to_string(squares) +
           " (hearth enforces up to " + std::to_string(kMaxSpelled * kMaxSpelled) + ")' at /";
  if (quantifier_squares > kMaxQuantifierSquares)
    return "'patterns whose quantifier counts, each squared, sum to " + std::to_string(quantifier_squares) +
           " (hearth enforces up to " + std::to_string(kMaxQuantifierSquares) + ")' at /";
  return "";
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
