// StopMatcher: stop strings inside one token, across tokens, false prefixes, several stop
// strings (and which one matched), end-of-generation tokens, and UTF-8 characters split over
// tokens.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/sampling/stop.h"

using hearth::StopMatcher;

namespace {

struct Run {
  std::vector<std::string> texts;  // one per feed
  bool stopped = false;
  std::string all;  // everything emitted, flush included when not stopped
};

Run feed_all(StopMatcher& m, const std::vector<std::string>& tokens) {
  Run r;
  for (const std::string& t : tokens) {
    StopMatcher::Step s = m.feed(t);
    r.texts.push_back(s.text);
    r.all += s.text;
    if (s.stopped) {
      r.stopped = true;
      break;
    }
  }
  if (!r.stopped) r.all += m.flush();
  return r;
}

}  // namespace

TEST_CASE("without stop strings text passes through at once", "[stop]") {
  StopMatcher m({});
  const Run r = feed_all(m, {"Hello", ", ", "world"});
  CHECK(r.texts == std::vector<std::string>{"Hello", ", ", "world"});
  CHECK_FALSE(r.stopped);
}

TEST_CASE("a stop string inside one token stops and emits only the text before it", "[stop]") {
  StopMatcher m({"###"});
  const Run r = feed_all(m, {"Hi", " there### and more", "never"});
  CHECK(r.stopped);
  CHECK(r.texts == std::vector<std::string>{"Hi", " there"});
  CHECK(m.feed("x").stopped);
  CHECK(m.feed("x").text.empty());
  CHECK(m.flush().empty());
}

TEST_CASE("a stop string spanning three tokens is held back and never emitted", "[stop]") {
  StopMatcher m({"</end>"});
  const Run r = feed_all(m, {"ok </", "en", "d> tail"});
  CHECK(r.stopped);
  CHECK(r.texts == std::vector<std::string>{"ok ", "", ""});
}

TEST_CASE("a false prefix of a stop string is released when the next token breaks it", "[stop]") {
  StopMatcher m({"</end>"});
  const Run r = feed_all(m, {"a </e", "x", "!"});
  CHECK_FALSE(r.stopped);
  CHECK(r.texts == std::vector<std::string>{"a ", "</ex", "!"});
  CHECK(r.all == "a </ex!");
}

TEST_CASE("a held prefix is released by flush at the end of generation", "[stop]") {
  StopMatcher m({"STOP"});
  CHECK(m.feed("go ST").text == "go ");
  CHECK(m.flush() == "ST");
}

TEST_CASE("a prefix that fails can still hide a later start of the stop string", "[stop]") {
  StopMatcher m({"aab"});
  // "aa" then "a": "aaa" is not a prefix, but its suffix "aa" is.
  CHECK(m.feed("aa").text.empty());
  CHECK(m.feed("a").text == "a");
  const StopMatcher::Step s = m.feed("b!");
  CHECK(s.stopped);
  CHECK(s.text.empty());
}

TEST_CASE("with several stop strings the earliest one in the text wins", "[stop]") {
  StopMatcher m({"world", "lo w", "\n\n"});
  const Run r = feed_all(m, {"hel", "lo wor", "ld"});
  CHECK(r.stopped);
  CHECK(r.all == "hel");

  StopMatcher m2({"User:", "\n\n"});
  const Run r2 = feed_all(m2, {"Answer.\n", "\nUser:"});
  CHECK(r2.stopped);
  CHECK(r2.all == "Answer.");
}

TEST_CASE("a stop string at the very start emits nothing", "[stop]") {
  StopMatcher m({"<eot>"});
  const StopMatcher::Step s = m.feed("<eot>hello");
  CHECK(s.stopped);
  CHECK(s.text.empty());
}

TEST_CASE("an end-of-generation token stops without its text and releases held text", "[stop]") {
  StopMatcher m({"STOP"}, {1, 106});
  CHECK(m.is_eog(106));
  CHECK_FALSE(m.is_eog(2));
  CHECK(m.feed_token(5, "x ST").text == "x ");
  const StopMatcher::Step s = m.feed_token(106, "<end_of_turn>");
  CHECK(s.stopped);
  CHECK(s.text == "ST");
  CHECK(m.feed_token(5, "more").stopped);
}

TEST_CASE("the matcher says which stop string ended generation, and none for an end-of-generation token", "[stop]") {
  StopMatcher m({"world", "lo w", "\n\n"});
  CHECK(m.matched().empty());
  feed_all(m, {"hel", "lo wor", "ld"});
  CHECK(m.matched() == "lo w");  // the earliest in the text, not the first listed

  StopMatcher across({"</end>"});
  feed_all(across, {"ok </", "en", "d> tail"});
  CHECK(across.matched() == "</end>");

  // Two complete in the same token at the same place: the shorter was complete first.
  StopMatcher tie({"abc", "ab"});
  feed_all(tie, {"xabc"});
  CHECK(tie.matched() == "ab");

  StopMatcher eog({"STOP"}, {106});
  eog.feed_token(5, "x ST");
  CHECK(eog.feed_token(106, "<end_of_turn>").stopped);
  CHECK(eog.matched().empty());

  StopMatcher flushed({"STOP"});
  flushed.feed("go ST");
  flushed.flush();
  CHECK(flushed.matched().empty());
}

TEST_CASE("a UTF-8 character split over tokens is emitted only when complete", "[stop]") {
  StopMatcher m({});
  // U+00E9 (2 bytes), U+20AC (3 bytes), U+1F600 (4 bytes), one byte per token
  const std::vector<std::string> tokens = {"\xC3", "\xA9", "\xE2", "\x82", "\xAC", "\xF0", "\x9F", "\x98", "\x80", "!"};
  const Run r = feed_all(m, tokens);
  CHECK(r.texts ==
        std::vector<std::string>{"", "\xC3\xA9", "", "", "\xE2\x82\xAC", "", "", "", "\xF0\x9F\x98\x80", "!"});
  StopMatcher m2({});
  CHECK(m2.feed("a\xF0\x9F").text == "a");
  CHECK(m2.feed("\x98\x80"
                "b")
            .text ==
        "\xF0\x9F\x98\x80"
        "b");
}

TEST_CASE("a stop string made of multi-byte characters matches across split bytes", "[stop]") {
  StopMatcher m(
      {"\xE2\x80\x94"
       "end"});  // U+2014 EM DASH + "end"
  const Run r = feed_all(m, {"caf\xC3", "\xA9 \xE2\x80", "\x94", "en", "d"});
  CHECK(r.stopped);
  CHECK(r.all == "caf\xC3\xA9 ");
}

TEST_CASE("invalid bytes are replaced by U+FFFD so the output is valid UTF-8", "[stop]") {
  StopMatcher m({});
  // stray continuation byte; incomplete sequence cut by ASCII; byte 0xFF
  CHECK(m.feed("a\x80"
               "b")
            .text ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(m.feed("\xE2\x82").text.empty());
  CHECK(m.feed("x").text == "\xEF\xBF\xBDx");
  CHECK(m.feed("\xFF").text == "\xEF\xBF\xBD");
}

TEST_CASE("flush replaces an incomplete UTF-8 sequence at the very end", "[stop]") {
  StopMatcher m({});
  CHECK(m.feed("ok\xF0\x9F\x98").text == "ok");
  CHECK(m.flush() == "\xEF\xBF\xBD");
  CHECK(m.flush().empty());
}

TEST_CASE("empty and ill-formed stop strings are ignored", "[stop]") {
  StopMatcher m({"", "\xA9"});
  const Run r = feed_all(m, {"caf\xC3\xA9", " ok"});
  CHECK_FALSE(r.stopped);
  CHECK(r.all == "caf\xC3\xA9 ok");
}
