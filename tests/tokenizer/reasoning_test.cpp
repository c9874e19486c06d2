// The reasoning block of a thinking model's answer (Qwen3's <think>...</think>) comes out as
// reasoning, never as content, however the text is cut into pieces.
#include "engine/tokenizer/reasoning.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

struct Split {
  std::string reasoning, content;
  bool operator==(const Split& o) const { return reasoning == o.reasoning && content == o.content; }
};

std::ostream& operator<<(std::ostream& os, const Split& s) {
  return os << "{reasoning: \"" << s.reasoning << "\", content: \"" << s.content << "\"}";
}

// Feeds the pieces, then finish(); all reasoning must come before any content.
Split run(const std::vector<std::string>& pieces, bool inside = false) {
  hearth::ReasoningSplitter splitter(inside);
  Split out;
  auto take = [&](const std::vector<hearth::ReasoningSplitter::Piece>& got) {
    for (const auto& p : got) {
      CHECK_FALSE(p.text.empty());
      if (p.reasoning) {
        CHECK(out.content.empty());
        out.reasoning += p.text;
      } else {
        out.content += p.text;
      }
    }
  };
  for (const std::string& p : pieces) take(splitter.feed(p));
  take(splitter.finish());
  return out;
}

Split whole(const std::string& text, bool inside = false) {
  return run({text}, inside);
}

// The same split for the text cut at every byte into two pieces, and fed byte by byte.
void check_any_cut(const std::string& text, const Split& expected, bool inside = false) {
  INFO("answer: " << text);
  CHECK(whole(text, inside) == expected);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(run({text.substr(0, cut), text.substr(cut)}, inside) == expected);
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(run(bytes, inside) == expected);
}

}  // namespace

TEST_CASE("a reasoning block is reasoning and the text after it content, cut anywhere") {
  check_any_cut("<think>\nThe user asks 2+2.\nThat is 4.\n</think>\n\nIt is 4.",
                {"The user asks 2+2.\nThat is 4.", "It is 4."});
  // Qwen3 without thinking writes an empty block, or none at all.
  check_any_cut("<think>\n\n</think>\n\nHello!", {"", "Hello!"});
  check_any_cut("Hello!", {"", "Hello!"});
  // Whitespace before the block; markup-like text inside it that is not the close.
  check_any_cut(" \n<think>a < b, </th is not </think >, nor </thinking>\t\n</think>x y",
                {"a < b, </th is not </think >, nor </thinking>", "x y"});
  // Multi-byte UTF-8 on both sides.
  check_any_cut("<think>Météo à Zürich ☀</think>\n東京: 18 °C", {"Météo à Zürich ☀", "東京: 18 °C"});
}

TEST_CASE("a tag anywhere but the start of the answer is content") {
  check_any_cut("The tag <think> opens a block.</think>", {"", "The tag <think> opens a block.</think>"});
  check_any_cut("<thinker>", {"", "<thinker>"});
  check_any_cut("<thin", {"", "<thin"});  // an answer that stops inside what might have been the tag
  check_any_cut("  \n", {"", "  \n"});
  // After the block, a second one is content.
  check_any_cut("<think>a</think><think>b</think>", {"a", "<think>b</think>"});
}

TEST_CASE("an answer cut off inside its reasoning is all reasoning") {
  check_any_cut("<think>\nStill thinking about it\n", {"Still thinking about it", ""});
  check_any_cut("<think>\nAlmost </thi", {"Almost </thi", ""});
  check_any_cut("<think>", {"", ""});
}

TEST_CASE("when the prompt opened the block, the answer starts as reasoning") {
  check_any_cut("\nI should greet.\n</think>\n\nHi!", {"I should greet.", "Hi!"}, /*inside=*/true);
  check_any_cut("<think>is text here</think>ok", {"<think>is text here", "ok"}, /*inside=*/true);
}

TEST_CASE("reasoning comes out as it is written, held back only where the close may start") {
  hearth::ReasoningSplitter s;
  CHECK(s.feed("<thi").empty());
  auto got = s.feed("nk>\nStep one");
  REQUIRE(got.size() == 1);
  CHECK(got[0].reasoning);
  CHECK(got[0].text == "Step one");
  got = s.feed(".\n</");  // the newline and "</" may belong to the close
  REQUIRE(got.size() == 1);
  CHECK(got[0].text == ".");
  got = s.feed("b>\n");  // they did not
  REQUIRE(got.size() == 1);
  CHECK(got[0].text == "\n</b>");
  got = s.feed("</think>\n\nDone");
  REQUIRE(got.size() == 1);
  CHECK_FALSE(got[0].reasoning);
  CHECK(got[0].text == "Done");
  got = s.feed(" and more");
  REQUIRE(got.size() == 1);
  CHECK(got[0].text == " and more");
  CHECK(s.finish().empty());
}
