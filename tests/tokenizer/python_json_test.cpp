// tojson as chat templates see it: Python's json.dumps(json.loads(text), ensure_ascii=False).
// Every expected string below is what CPython 3.11 printed for the input beside it.
#include "engine/tokenizer/python_json.h"

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

using hearth::tok::python_json_dumps;
using hearth::tok::python_json_string;

namespace {

std::string dumps(std::string_view text, int indent = -1) {
  auto r = python_json_dumps(text, indent);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("numbers come out as Python prints them") {
  const std::vector<std::pair<const char*, const char*>> cases{
      {"0.5", "0.5"},
      {"1e-3", "0.001"},
      {"1E5", "100000.0"},
      {"1.0", "1.0"},
      {"100.0", "100.0"},
      {"2.50", "2.5"},
      {"-0", "0"},
      {"-0.0", "-0.0"},
      {"0.1", "0.1"},
      {"0.30000000000000004", "0.30000000000000004"},
      {"123456789.125", "123456789.125"},
      {"1e15", "1000000000000000.0"},  // fixed point up to 16 digits before the point
      {"1e16", "1e+16"},
      {"1e22", "1e+22"},
      {"0.0001", "0.0001"},
      {"0.00001", "1e-05"},
      {"1.5e-7", "1.5e-07"},
      {"1e308", "1e+308"},
      {"1.7976931348623157e308", "1.7976931348623157e+308"},
      {"5e-324", "5e-324"},
      // Integers keep every digit, past 64 bits too (Python's int is unbounded).
      {"9007199254740993", "9007199254740993"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"18446744073709551615", "18446744073709551615"},
      {"18446744073709551616", "18446744073709551616"},
      {"123456789012345678901234567890", "123456789012345678901234567890"},
      {"-12345678901234567890123", "-12345678901234567890123"},
  };
  for (const auto& [in, want] : cases) {
    INFO(in);
    CHECK(dumps(in) == want);
  }
}

TEST_CASE("strings are re-escaped as Python does, non-ASCII and HTML left as they are") {
  // Input escapes are undone (\u00e9 \/ and a surrogate pair); only ", \ and C0 controls
  // are escaped again, controls as lower-case \u00xx; U+007F and U+2028 stay raw.
  CHECK(dumps(R"("\u00e9\/\ud83d\ude00\u0001\u001f\u007f\u2028 <b>&</b> '")") ==
        "\"é/😀\\u0001\\u001f\x7f\u2028 <b>&</b> '\"");
  CHECK(dumps(R"("a\"b\\c\nd\re\tf\bg\fh")") == R"("a\"b\\c\nd\re\tf\bg\fh")");
  CHECK(python_json_string("Zürich \"x\"\n\x01") == "\"Zürich \\\"x\\\"\\n\\u0001\"");
}

TEST_CASE("containers keep their key order, with Python's separators") {
  CHECK(dumps(" { \"a\" :\n[ 1 ,2 , {\"c\":null,\"d\":true} ] } ") == R"({"a": [1, 2, {"c": null, "d": true}]})");
  CHECK(dumps(R"({"z": 1, "a": 2, "m": {"y": [], "x": {}}})") == R"({"z": 1, "a": 2, "m": {"y": [], "x": {}}})");
  // A key given twice keeps its first place and its last value, as a Python dict does.
  CHECK(dumps(R"({"b": 1, "a": {"y": [], "x": {}}, "b": 3})") == R"({"b": 3, "a": {"y": [], "x": {}}})");
}

TEST_CASE("an indent puts each item on its own line and leaves empty containers whole") {
  CHECK(dumps(R"({"a": [1, {"b": []}], "c": {}})", 4) ==
        "{\n    \"a\": [\n        1,\n        {\n            \"b\": []\n        }\n    ],\n    \"c\": {}\n}");
  CHECK(dumps("[]", 4) == "[]");
  CHECK(dumps(R"({"a":{}})", 0) == "{\n\"a\": {}\n}");
  CHECK(dumps("7", 4) == "7");
}

TEST_CASE("malformed JSON, numbers beyond a double and lone surrogates are errors, not crashes") {
  for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "{\"a\": 1} x", "1e400", "\"\\ud800\"", "\"\xff\"", "nul"}) {
    INFO(bad);
    auto r = python_json_dumps(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("invalid JSON") == 0);
  }
}
