// Call forms and the streaming call parser. Events are written compactly to read as a
// specification: C[text] content, B0(name) call 0 begins, A0[json] its arguments, E0[] it ends
// (E0[why] when broken). Pieces of one kind are joined: how text is cut never matters, which
// the split tests check for every input here.
#include "engine/tokenizer/tool_calls.h"

#include <catch2/catch.hpp>

using hearth::CallForm;
using hearth::ChatFamily;
using hearth::ChatTemplate;
using hearth::ToolCallParser;
using hearth::ToolSyntax;
using Kind = ToolCallParser::Event::Kind;

namespace {

ChatTemplate with_syntax(ToolSyntax s) {
  ChatTemplate t(s == ToolSyntax::Llama31 ? ChatFamily::Llama3 : ChatFamily::ChatML);
  t.tool_syntax = s;
  if (s == ToolSyntax::Llama31) t.date_string = "26 Jul 2024";
  return t;
}

const std::vector<std::string> kNames{"get_weather", "get_time", "search"};

// Feeds `pieces`, then finishes; joins neighbouring Content pieces and the CallArguments pieces
// of one call, and writes what came out.
std::string parse_pieces(const std::vector<CallForm>& forms, const std::vector<std::string>& names,
                         const std::vector<std::string>& pieces) {
  ToolCallParser p(forms, names);
  std::vector<ToolCallParser::Event> all;
  for (const std::string& piece : pieces) {
    for (auto& e : p.feed(piece)) all.push_back(std::move(e));
  }
  for (auto& e : p.finish()) all.push_back(std::move(e));
  std::string out;
  Kind last = Kind::CallBegin;
  for (const auto& e : all) {
    const bool joins = (e.kind == Kind::Content || e.kind == Kind::CallArguments) && e.kind == last && !out.empty();
    if (joins) {
      out.insert(out.size() - 1, e.text);
      continue;
    }
    const std::string i = std::to_string(e.index);
    switch (e.kind) {
      case Kind::Content:
        CHECK(e.index == -1);
        out += "C[" + e.text + "]";
        break;
      case Kind::CallBegin:
        out += "B" + i + "(" + e.name + ")";
        break;
      case Kind::CallArguments:
        out += "A" + i + "[" + e.text + "]";
        break;
      case Kind::CallEnd:
        out += "E" + i + "[" + e.text + "]";
        break;
    }
    last = e.kind;
  }
  return out;
}

std::string parse(const std::vector<CallForm>& forms, const std::string& text,
                  const std::vector<std::string>& names = kNames) {
  return parse_pieces(forms, names, {text});
}

const auto kHermes = hearth::call_forms(with_syntax(ToolSyntax::Hermes), false);
const auto kHermesLenient = hearth::call_forms(with_syntax(ToolSyntax::Hermes), true);
const auto kLlama = hearth::call_forms(with_syntax(ToolSyntax::Llama31), true);

}  // namespace

TEST_CASE("each template's own call form comes first, and lenient adds what small models write") {
  REQUIRE(kHermes.size() == 1);
  CHECK(kHermes[0].trigger == "<tool_call>");
  CHECK(kHermes[0].open("f") == "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  CHECK(kHermes[0].close == "}\n</tool_call>");
  REQUIRE(kHermesLenient.size() == 7);
  CHECK(kHermesLenient[0].open("f") == kHermes[0].open("f"));
  for (size_t i = 1; i < kHermesLenient.size(); ++i) CHECK(kHermesLenient[i].trigger.empty());
  CHECK(kLlama[0].open("f") == "{\"name\": \"f\", \"parameters\": ");
  CHECK(kLlama[0].trigger.empty());
  CHECK(hearth::call_forms(ChatTemplate(ChatFamily::Gemma), true).empty());
}

TEST_CASE("text with no call is content") {
  CHECK(parse(kHermesLenient, "Hello, world. {\"a\": 1} <b>") == "C[Hello, world. {\"a\": 1} <b>]");
  CHECK(parse(kHermesLenient, "") == "");
}

TEST_CASE("a call in Hermes form, with content before, between and after") {
  const std::string call1 =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>";
  const std::string call2 = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  CHECK(parse(kHermes, call1) == "B0(get_weather)A0[{\"city\": \"Lyon\"}]E0[]");
  CHECK(parse(kHermes, "Let me check.\n" + call1 + "\n" + call2 + "\nDone.") ==
        "C[Let me check.\n]B0(get_weather)A0[{\"city\": \"Lyon\"}]E0[]C[\n]B1(get_time)A1[{}]E1[]C[\nDone.]");
}

TEST_CASE("every lenient Hermes form, as Qwen2.5-Coder-0.5B writes it") {
  const std::string args = "{\"city\": \"Lyon\", \"unit\": \"celsius\"}";
  const std::string pretty = "{\n    \"city\": \"Lyon\",\n    \"unit\": \"celsius\"\n  }";
  CHECK(parse(kHermesLenient, "{\"name\": \"get_weather\", \"arguments\": " + args + "}") ==
        "B0(get_weather)A0[" + args + "]E0[]");
  CHECK(parse(kHermesLenient, "```json\n{\"name\": \"get_weather\", \"arguments\": " + args + "}\n```") ==
        "B0(get_weather)A0[" + args + "]E0[]");
  CHECK(parse(kHermesLenient, "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": " + pretty + "\n}\n```") ==
        "B0(get_weather)A0[" + pretty + "]E0[]");
  CHECK(parse(kHermesLenient, "{\n  \"name\": \"get_weather\",\n  \"arguments\": " + pretty + "\n}") ==
        "B0(get_weather)A0[" + pretty + "]E0[]");
  CHECK(parse(kHermesLenient, "{\n    \"name\": \"get_weather\",\n    \"arguments\": {}\n}") ==
        "B0(get_weather)A0[{}]E0[]");
  CHECK(parse(kHermesLenient, "{\n\"name\": \"get_weather\",\n\"arguments\": {\n\"city\": \"Lyon\"\n}\n}") ==
        "B0(get_weather)A0[{\n\"city\": \"Lyon\"\n}]E0[]");
  // Content before a lenient call, and two calls one after the other, as the model writes them.
  CHECK(parse(kHermesLenient,
              "Here's the JSON:\n{\"name\": \"search\", \"arguments\": {\"q\": \"a\"}}\n"
              "{\"name\": \"get_time\", \"arguments\": {}}") ==
        "C[Here's the JSON:\n]B0(search)A0[{\"q\": \"a\"}]E0[]C[\n]B1(get_time)A1[{}]E1[]");
  // Without `lenient` those are content.
  CHECK(parse(kHermes, "{\"name\": \"get_weather\", \"arguments\": " + args + "}") ==
        "C[{\"name\": \"get_weather\", \"arguments\": " + args + "}]");
}

TEST_CASE("Llama 3.1's JSON call, with or without a type") {
  CHECK(parse(kLlama, "{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}") == "B0(search)A0[{\"q\": \"x\"}]E0[]");
  CHECK(parse(kLlama, "{\"type\": \"function\", \"name\": \"search\", \"parameters\": {}}") == "B0(search)A0[{}]E0[]");
}

TEST_CASE("only offered functions engage a form") {
  CHECK(parse(kHermesLenient, "{\"name\": \"delete_all\", \"arguments\": {}}") ==
        "C[{\"name\": \"delete_all\", \"arguments\": {}}]");
  CHECK(parse(kHermesLenient, "{\"name\": \"get_weather\", \"arguments\": {}}", {}) ==
        "C[{\"name\": \"get_weather\", \"arguments\": {}}]");
}

TEST_CASE("names that are prefixes of each other are told apart") {
  const std::vector<std::string> names{"get", "get_weather", "get_weather_now"};
  for (const std::string& n : names) {
    CHECK(parse(kHermesLenient, "{\"name\": \"" + n + "\", \"arguments\": {}}", names) == "B0(" + n + ")A0[{}]E0[]");
  }
  CHECK(parse(kHermesLenient, "{\"name\": \"get_w\", \"arguments\": {}}", names) ==
        "C[{\"name\": \"get_w\", \"arguments\": {}}]");
}

TEST_CASE("braces, brackets and escaped quotes inside strings do not end the arguments") {
  const std::string args = R"({"q": "a } b { \" } \\", "n": {"x": [1, {"y": "]"}]}, "e": "\\\""})";
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>after") ==
        "B0(search)A0[" + args + "]E0[]C[after]");
}

TEST_CASE("whitespace before the arguments is dropped, and close may vary its whitespace") {
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\":  \n {}}</tool_call>") ==
        "B0(search)A0[{}]E0[]");
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {} }\n\n</tool_call>\n") ==
        "B0(search)A0[{}]E0[]C[\n]");
}

TEST_CASE("an opening that does not lead to an object is content, and the search goes on") {
  CHECK(parse(kHermesLenient, "{\"name\": \"search\", \"arguments\": \"q=x\"}") ==
        "C[{\"name\": \"search\", \"arguments\": \"q=x\"}]");
  CHECK(parse(kHermesLenient, "<tool_call>\n{\"name\":\"search\"} {\"name\": \"search\", \"arguments\": {}}") ==
        "C[<tool_call>\n{\"name\":\"search\"} ]B0(search)A0[{}]E0[]");
  // A broken native opening that holds a lenient one: the lenient one is found inside it.
  CHECK(parse(kHermesLenient, "<tool_call>\n\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>") ==
        "C[<tool_call>\n\n]B0(search)A0[{}]E0[]C[\n</tool_call>]");
}

TEST_CASE("where two openings start at one place, the longer one followed by '{' wins") {
  const std::vector<CallForm> forms{{"", "[", "]", ""}, {"", "[", "]]", ""}};
  CHECK(parse(forms, "[f]]{}", {"f"}) == "B0(f)A0[{}]E0[]");
  CHECK(parse(forms, "[f]{}", {"f"}) == "B0(f)A0[{}]E0[]");
  CHECK(parse(forms, "[f]]x{}", {"f"}) == "C[[f]]x{}]");
}

TEST_CASE("brackets that do not match end the call, and the rest is content") {
  CHECK(parse(kHermesLenient, "{\"name\": \"search\", \"arguments\": {\"a\": [1}} more") ==
        "B0(search)A0[{\"a\": [1]"
        "E0[its arguments are not well-formed JSON: a bracket closes what it did not open]C[}} more]");
}

TEST_CASE("a close that breaks off ends the call and gives its text back as content") {
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\nHello") ==
        "B0(search)A0[{}]E0[]C[}\nHello]");
}

TEST_CASE("text that may open a call is held back until it cannot") {
  ToolCallParser p(kHermesLenient, kNames);
  auto a = p.feed("Hi <tool_");
  REQUIRE(a.size() == 1);
  CHECK(a[0].text == "Hi ");
  auto b = p.feed("x> and {\"name\": \"get");
  REQUIRE(b.size() == 1);
  CHECK(b[0].text == "<tool_x> and ");
  auto c = p.feed("_weather\", \"arguments\": ");
  CHECK(c.empty());  // the opening is whole, but only '{' engages it
  auto d = p.feed("{\"city\"");
  REQUIRE(d.size() == 2);
  CHECK(d[0].kind == Kind::CallBegin);
  CHECK(d[0].name == "get_weather");
  CHECK(d[0].index == 0);
  CHECK(d[1].kind == Kind::CallArguments);
  CHECK(d[1].text == "{\"city\"");
}

TEST_CASE("finish: held text is content, an unfinished call ends with a reason, a cut close is fine") {
  CHECK(parse(kHermes, "see <tool_ca") == "C[see <tool_ca]");
  CHECK(parse(kHermesLenient, "x {\"name\": \"search\", \"arguments\": ") ==
        "C[x {\"name\": \"search\", \"arguments\": ]");
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"unterminated") ==
        "B0(search)A0[{\"q\": \"unterminated]E0[generation ended inside its arguments: they are incomplete JSON]");
  CHECK(parse(kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool") == "B0(search)A0[{}]E0[]");
}

TEST_CASE("a call the template renders parses back into the same call") {
  for (ToolSyntax s : {ToolSyntax::Hermes, ToolSyntax::Llama31}) {
    const ChatTemplate t = with_syntax(s);
    hearth::ChatMessage m{"assistant", ""};
    m.tool_calls.push_back({"call_1", "get_weather", R"({"city": "Lyon", "n": [1, {"x": "}"}]})"});
    auto r = hearth::render_chat(t, {{"user", "x"}, m}, false);
    REQUIRE(r.ok());
    const std::string text = hearth::join_segments(*r);
    const auto forms = hearth::call_forms(t, false);
    const std::string opening = forms[0].open("get_weather");
    const size_t at = text.find(opening);
    REQUIRE(at != std::string::npos);
    const std::string args = R"({"city": "Lyon", "n": [1, {"x": "}"}]})";
    CHECK(text.compare(at, opening.size() + args.size() + forms[0].close.size(), opening + args + forms[0].close) == 0);
    CHECK(parse(forms, text.substr(at, opening.size() + args.size() + forms[0].close.size())) ==
          "B0(get_weather)A0[" + args + "]E0[]");
  }
}

TEST_CASE("the events are the same however the text is cut: at every byte, and byte by byte") {
  const std::vector<std::pair<std::vector<CallForm>, std::string>> inputs{
      {kHermes,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nDone."},
      {kHermesLenient,
       "```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"q\": \"a } \\\" {\"\n  }\n}\n```"},
      {kHermesLenient, "<tool_call>\n{\"name\":\"search\"} {\"name\": \"search\", \"arguments\": {}} <tool_"},
      {kHermesLenient, "{\"name\": \"search\", \"arguments\": {\"a\": [1}} more"},
      {kHermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\nHello <tool_call>\n{\"name\": \"get"},
      {kLlama,
       "{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {\"tz\": \"\\\\\"}}{\"name\": \"search\""},
      {kHermesLenient, "é {\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\"}} ✓"},
  };
  for (const auto& [forms, text] : inputs) {
    INFO(text);
    const std::string whole = parse(forms, text);
    for (size_t k = 0; k <= text.size(); ++k) {
      INFO("cut at " << k);
      REQUIRE(parse_pieces(forms, kNames, {text.substr(0, k), text.substr(k)}) == whole);
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    CHECK(parse_pieces(forms, kNames, bytes) == whole);
  }
}

TEST_CASE("finish after a cut: the held start of a call is dropped, content before it stays") {
  ToolCallParser p(kHermesLenient, kNames);
  auto a = p.feed("Let me check.\n{\"name\": \"get_wea");
  REQUIRE(a.size() == 1);
  CHECK(a[0].text == "Let me check.\n");
  CHECK(p.finish(/*cut_short=*/true).empty());
  ToolCallParser q(kHermesLenient, kNames);
  CHECK(q.feed("a plain answer").size() == 1);
  CHECK(q.finish(/*cut_short=*/true).empty());
}
