// Constrained decoding on a small vocabulary of our own: every byte is a token, plus a few
// longer pieces and an end-of-generation token. Random logits drive generation under the
// grammar's mask; whatever the draw, the output must fit the grammar, and generation may
// end only where the grammar does. The same properties on the real model: tests/e2e.
#include <catch2/catch.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling/distribution.h"
#include "engine/sampling/grammar.h"
#include "engine/sampling/json_schema.h"
#include "engine/sampling/utf8.h"

namespace {

using namespace hearth;
using json = nlohmann::ordered_json;

constexpr int32_t kEos = 0;

// Token 0: end of generation (no text, a control token); 1..256: the bytes 0..255; then
// pieces a model's vocabulary has.
std::vector<std::string> vocabulary() {
  std::vector<std::string> v{""};
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* piece : {"{\"", "\":", "\": ", "true", "false", "null", "  ", "\n", "<call>", "name", "city", "\"}",
                            "12", "Paris", " the", "```json"})
    v.push_back(piece);
  return v;
}

GrammarCompiler& compiler() {
  static GrammarCompiler* c = new GrammarCompiler(vocabulary(), static_cast<int32_t>(vocabulary().size()) + 3, {kEos});
  return *c;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

struct Generated {
  std::string text;
  bool ended = false;  // the end-of-generation token was drawn (under the mask)
};

// Draws up to max_tokens tokens from random logits under the grammar's mask. close_bias
// favours the bytes that close strings, objects and arrays, so that free-form JSON (an
// object of any shape) ends in a bounded number of draws.
Generated generate(std::shared_ptr<const CompiledGrammar> grammar, uint64_t seed, int max_tokens = 400,
                   float close_bias = 0.0f) {
  static const std::vector<std::string> vocab = vocabulary();
  const int32_t n_vocab = compiler().n_vocab();
  GrammarMatcher matcher(std::move(grammar));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  Generated out;
  for (int i = 0; i < max_tokens; ++i) {
    for (float& l : logits) l = noise(rng);
    logits[kEos] -= 3.0f;  // a model rarely wants to stop: the grammar must make it
    for (char c : {'"', '}', ']'}) logits[1 + static_cast<unsigned char>(c)] += close_bias;
    // Free-form JSON may write 93E586, which is JSON but not a double; keep exponents rare.
    for (char c : {'e', 'E'}) logits[1 + static_cast<unsigned char>(c)] -= close_bias;
    matcher.mask(logits.data(), n_vocab);
    const int32_t t = argmax(logits.data(), n_vocab);
    REQUIRE(std::isfinite(logits[static_cast<size_t>(t)]));  // some token is always allowed
    REQUIRE(matcher.accept(t));
    if (t == kEos) {
      out.ended = true;
      REQUIRE(matcher.terminated());
      return out;
    }
    REQUIRE(t < static_cast<int32_t>(vocab.size()));
    out.text += vocab[static_cast<size_t>(t)];
  }
  return out;
}

// The text as the engine streams it: through the UTF-8 check, which replaces what is not
// well-formed with U+FFFD. (The grammar's character classes admit the UTF-16 surrogates'
// three-byte forms, ED A0..BF xx; a model would have to spell one byte by byte.)
std::string as_streamed(const std::string& bytes) {
  return sanitize_utf8(bytes);
}

}  // namespace

TEST_CASE("unsupported schema keywords are named with their place, annotations and enforced ones pass") {
  CHECK(unsupported_schema_keyword(R"({"type":"array","uniqueItems":true})") == "'uniqueItems' at /");
  CHECK(unsupported_schema_keyword(R"({"properties":{"a/b":{"oneOf":[{"type":"string"}]}}})") ==
        "'oneOf' at /properties/a~1b");
  CHECK(unsupported_schema_keyword(R"({"$defs":{"x":{"not":{}}},"$ref":"#/$defs/x"})") == "'not' at /$defs/x");
  CHECK(unsupported_schema_keyword(R"({"type":"string","format":"ip-address"})") == "'format \"ip-address\"' at /");
  CHECK(unsupported_schema_keyword(R"({"type":"number","multipleOf":0.5})") == "'multipleOf' at /");
  CHECK(unsupported_schema_keyword(R"({"allOf":[{"type":"object"},{"required":["a"]}]})") == "'allOf' at /");
  CHECK(unsupported_schema_keyword(R"({"type":"array","items":{"if":{}}})") == "'if' at /items");
  CHECK(unsupported_schema_keyword(R"({"type":"string","pattern":"^a","maxLength":3})") ==
        "'maxLength with pattern' at /");
  for (const char* ok : {R"({"type":"integer","multipleOf":3,"minimum":0})",
                         R"({"title":"t","description":"d","default":1,"examples":[1],"x-vendor":true})",
                         R"({"anyOf":[{"type":"string","pattern":"^a+$"},{"enum":[1,2]}]})",
                         R"({"$defs":{"n":{"type":"number"}},"type":"array","items":{"$ref":"#/$defs/n"}})",
                         R"({"type":"string","format":"date-time"})", R"({"type":"array","uniqueItems":false})",
                         R"({"allOf":[{"type":"object"}]})"}) {
    INFO(ok);
    CHECK(unsupported_schema_keyword(ok).empty());
  }
}

TEST_CASE("a schema whose counted repeats the grammar cannot take is refused at once, with the reason") {
  // Past a count of 128 the grammar library fails its own check on the chat models'
  // vocabularies, or (small ones) compiles in time quadratic in the count: schema_fuzz
  // found minLength 3666 taking over 30 s. Spelled-out repeats cost about a second per 128.
  CHECK(unsupported_schema_keyword(R"({"type":"string","maxLength":100000})") ==
        "'maxLength 100000 (hearth enforces up to 128)' at /");
  CHECK(unsupported_schema_keyword(R"({"properties":{"a":{"type":"string","minLength":129}}})") ==
        "'minLength 129 (hearth enforces up to 128)' at /properties/a");
  for (const char* refused :
       {R"(^a{129}$)", R"(^\d{2000,}$)", R"(^a{0,5000}$)", R"(^[\]x]{99999999999999999999}$)", R"(^(a{2}){200}$)"}) {
    INFO(refused);
    CHECK(unsupported_schema_keyword(json{{"type", "string"}, {"pattern", refused}}.dump()) ==
          "'pattern with a repeat over 128 (hearth enforces up to 128)' at /");
  }
  for (const char* refused : {R"(^(ab{20}){24}$)", R"(^([a-z]{10}){5}(x{32}){15}$)", R"(^((a{10}){10}){6}$)",
                              R"(^(a|b){125}c{125}(d{100}){2}$)"}) {
    INFO(refused);
    CHECK(unsupported_schema_keyword(json{{"type", "string"}, {"pattern", refused}}.dump()) ==
          "'pattern whose repeats add over 500 characters (hearth enforces up to 500)' at /");
  }
  CHECK(unsupported_schema_keyword(R"({"type":"object","patternProperties":{"^a{2000}$":{}}})") ==
        "'patternProperties name with a repeat over 128 (hearth enforces up to 128)' at /");
  // At or under the limits, and braces that are no quantifier, are taken.
  for (const char* ok : {R"(^a{128}$)", R"(^(a{10}){10}$)", R"(^\{5000\}$)", R"(^a{x}$)", R"(^[{]5000}$)",
                         R"(^a{,5000}$)", R"(^(a|b){125}c{125}$)", R"(^(a{100}){5}$)"}) {
    INFO(ok);
    CHECK(unsupported_schema_keyword(json{{"type", "string"}, {"pattern", ok}}.dump()).empty());
  }
  CHECK(unsupported_schema_keyword(R"({"type":"string","minLength":128,"maxLength":128})").empty());
  std::string words = "^(w0";  // characters written once are no repeat: 1,000 of them pass
  for (int i = 1; words.size() < 1000; ++i) words += "|w" + std::to_string(i);
  CHECK(unsupported_schema_keyword(json{{"type", "string"}, {"pattern", words + ")$"}}.dump()).empty());
  // The whole schema's repeats, each squared (a compile costs about that), are bounded too.
  json many = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 16; ++i) many["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 128}};
  CHECK(unsupported_schema_keyword(many.dump()) ==
        "'string lengths and pattern repeats whose squares sum to 262144 (hearth enforces up to 250000)' at /");
  many["properties"]["p15"] = {{"type", "string"}, {"pattern", "^(a{10}){10}$"}};  // 15 x 128^2 + 99^2
  CHECK(unsupported_schema_keyword(many.dump()) ==
        "'string lengths and pattern repeats whose squares sum to 255561 (hearth enforces up to 250000)' at /");
  many["properties"]["p14"]["maxLength"] = 100;  // 14 x 128^2 + 100^2 + 99^2
  CHECK(unsupported_schema_keyword(many.dump()).empty());
  const Result<std::string> refused = schema_for_grammar(R"({"type":"string","maxLength":5000})");
  REQUIRE(!refused.ok());
  CHECK(refused.error().message ==
        "the schema uses 'maxLength 5000 (hearth enforces up to 128)' at /, which hearth cannot enforce while "
        "generating");
}

TEST_CASE("a pattern with more quantifiers than the grammar compiles in time is refused, with the count") {
  // The grammar's token masks follow every way a token can split across a run of
  // quantifiers: ^(.+)?...$ with 8 groups took 2.2 s on Qwen2.5's vocabulary, 100 groups of
  // ([a-z]+|[0-9]*)? 99 s, and schema_fuzz found 11,298 stars stacked on one atom.
  auto pattern = [](const std::string& p) { return json{{"type", "string"}, {"pattern", p}}.dump(); };
  auto refusal = [](std::string count) {
    return count.insert(0, "'pattern with ") +
           " quantifiers (*, +, ? or {n,m}, counted once per repeat of their group; hearth enforces up to 16)' at /";
  };
  std::string stars = "^a";
  for (int i = 0; i < 11298; ++i) stars += '*';
  CHECK(unsupported_schema_keyword(pattern(stars)) == refusal("over 500"));
  std::string groups = "^";
  for (int i = 0; i < 9; ++i) groups += "(.+)?";
  CHECK(unsupported_schema_keyword(pattern(groups + "$")) == refusal("18"));
  CHECK(unsupported_schema_keyword(pattern("^(a?){17}$")) == refusal("18"));  // ? repeated 17 times, and {17}
  CHECK(unsupported_schema_keyword(pattern("^a***************$x{2}?+")) == refusal("17"));
  CHECK(unsupported_schema_keyword(
            R"({"type":"object","patternProperties":{"^(.+)?(.+)?(.+)?(.+)?(.+)?(.+)?(.+)?(.+)?(.+)?$":{}}})") ==
        "'patternProperties name with 18 quantifiers (*, +, ? or {n,m}, counted once per repeat of their group; hearth "
        "enforces up to 16)' at /");
  // Lazy quantifiers, groups' kinds and escaped or classed characters are no quantifier: the
  // semantic-version pattern (15 quantifiers) passes.
  for (
      const char* ok :
      {R"(^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$)",
       R"(^a*?b+?c??d{2}?e{1,3}?f*g+h?i{4}j{5,}k{6,7}(?:l)(?=m)(?!n)o*p+q?$)", R"(^\*\+\?[*+?]{16}$)",
       R"(^(a?){15}$)"}) {
    INFO(ok);
    CHECK(unsupported_schema_keyword(pattern(ok)).empty());
  }
  // The whole schema's quantifiers, each pattern's count squared, are bounded too: four
  // patterns at the limit pass, a fifth quantifier more does not.
  json many = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 4; ++i) many["properties"][std::to_string(i)] = {{"type", "string"}, {"pattern", "^(a?){15}$"}};
  CHECK(unsupported_schema_keyword(many.dump()).empty());
  many["properties"]["4"] = {{"type", "string"}, {"pattern", "^a?$"}};
  CHECK(unsupported_schema_keyword(many.dump()) ==
        "'patterns whose quantifier counts, each squared, sum to 1025 (hearth enforces up to 1024)' at /");
}

TEST_CASE("a schema for the grammar opens what says nothing of its members and keeps the declared order") {
  const Result<std::string> r = schema_for_grammar(
      R"({"type":"object","properties":{"zeta":{"type":"object"},"alpha":{"type":"array"}},"required":["zeta"]})");
  REQUIRE(r.ok());
  const json j = json::parse(*r);
  CHECK(!j.contains("additionalProperties"));  // declares properties: exactly those
  CHECK(j["properties"]["zeta"]["additionalProperties"] == true);
  CHECK(j["properties"]["alpha"]["items"] == true);
  CHECK(j["properties"].begin().key() == "zeta");  // the schema's order, not sorted
  CHECK(!schema_for_grammar("{").ok());
  CHECK(!schema_for_grammar("[1]").ok());
  const Result<std::string> refused = schema_for_grammar(R"({"not":{}})");
  REQUIRE(!refused.ok());
  CHECK(refused.error().message.find("'not' at /") != std::string::npos);
}

TEST_CASE("under a JSON Schema grammar every draw of random logits gives JSON that fits, and ends only there") {
  const std::string schema = R"({"type":"object","properties":{
      "city":{"type":"string","maxLength":8},
      "n":{"type":"integer","minimum":1,"maximum":5},
      "unit":{"enum":["celsius","fahrenheit"]},
      "tags":{"type":"array","items":{"type":"boolean"},"maxItems":3}},
    "required":["city","n","unit","tags"]})";
  Result<std::shared_ptr<const CompiledGrammar>> g = compiler().json_schema(schema);
  REQUIRE(g.ok());
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    const Generated out = generate(*g, seed);
    INFO(out.text);
    REQUIRE(out.ended);
    const json j = json::parse(as_streamed(out.text));
    REQUIRE(j.is_object());
    CHECK(j.size() == 4);  // declared properties only
    CHECK(j["city"].is_string());
    CHECK(code_points(j["city"].get<std::string>()) <= 8);
    CHECK(j["n"].is_number_integer());
    CHECK(j["n"].get<int>() >= 1);
    CHECK(j["n"].get<int>() <= 5);
    CHECK((j["unit"] == "celsius" || j["unit"] == "fahrenheit"));
    CHECK(j["tags"].is_array());
    CHECK(j["tags"].size() <= 3);
    for (const json& t : j["tags"]) CHECK(t.is_boolean());
    // Keys come in the schema's order.
    CHECK(j.begin().key() == "city");
  }
}

TEST_CASE("json_object allows any object and nothing else") {
  Result<std::shared_ptr<const CompiledGrammar>> g = compiler().json_object();
  REQUIRE(g.ok());
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Generated out = generate(*g, seed, 4000, 3.0f);
    INFO(out.text);
    REQUIRE(out.ended);
    CHECK(json::parse(as_streamed(out.text)).is_object());
  }
}

TEST_CASE("a triggered tag leaves text free until its trigger, then forces the call's form") {
  const std::vector<TriggeredTag> tags{
      {"<call>", "<call>{\"name\": \"weather\", \"arguments\": ",
       R"({"type":"object","properties":{"city":{"type":"string","maxLength":6}},"required":["city"]})", "}</call>"}};
  SECTION("required: the output is calls only") {
    Result<std::shared_ptr<const CompiledGrammar>> g = compiler().triggered(tags, true, true);
    REQUIRE(g.ok());
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const Generated out = generate(*g, seed);
      INFO(out.text);
      REQUIRE(out.ended);
      const std::string open = "<call>{\"name\": \"weather\", \"arguments\": ";
      REQUIRE(out.text.rfind(open, 0) == 0);
      REQUIRE(out.text.size() > open.size() + 7);
      REQUIRE(out.text.substr(out.text.size() - 8) == "}</call>");
      const json args = json::parse(as_streamed(out.text.substr(open.size(), out.text.size() - open.size() - 8)));
      CHECK(args["city"].is_string());
    }
  }
  SECTION("auto: free text may come first; a call, once opened, is whole") {
    Result<std::shared_ptr<const CompiledGrammar>> g = compiler().triggered(tags, false, false);
    REQUIRE(g.ok());
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const Generated out = generate(*g, seed, 300);
      INFO(out.text);
      size_t at = 0;
      while ((at = out.text.find("<call>", at)) != std::string::npos) {
        const size_t close = out.text.find("</call>", at);
        if (close == std::string::npos) {
          CHECK(!out.ended);  // ended only outside a call
          break;
        }
        const std::string open = "<call>{\"name\": \"weather\", \"arguments\": ";
        REQUIRE(out.text.compare(at, open.size(), open) == 0);
        const std::string args = out.text.substr(at + open.size(), close - 1 - at - open.size());
        CHECK(json::parse(as_streamed(args))["city"].is_string());
        at = close;
      }
    }
  }
  CHECK(!compiler().triggered({{"x", "<call>", "{}", "</call>"}}, false, false).ok());  // trigger not a prefix
}

TEST_CASE("log_softmax_top gives the token's log-probability and the best n, masked tokens at -inf") {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::vector<float> logits{1.0f, 3.0f, kNegInf, 3.0f, 0.0f};
  std::vector<TokenScore> top;
  const float lp = log_softmax_top(logits.data(), 5, 4, 3, &top);
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.0));
  CHECK(lp == Approx(0.0 - lse));
  REQUIRE(top.size() == 3);
  CHECK(top[0].id == 1);  // a tie: the lower id first
  CHECK(top[1].id == 3);
  CHECK(top[2].id == 0);
  CHECK(top[0].logprob == Approx(3.0 - lse));
  CHECK(log_softmax_top(logits.data(), 5, 2, 0, &top) == kNegInf);
  CHECK(top.empty());
}
