// The client's server-sent-events parser on its own (linked from the library's objects).
#include "sse.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using hearth::client::Outcome;
using hearth::client::SseParser;

// Feeds text in pieces of `step` bytes and returns the events' data.
std::vector<std::string> parse(const std::string& text, size_t step) {
  std::vector<std::string> events;
  SseParser parser([&](std::string_view data) {
    events.emplace_back(data);
    return Outcome::success();
  });
  for (size_t at = 0; at < text.size(); at += step) {
    REQUIRE(parser.feed(text.data() + at, std::min(step, text.size() - at)).ok());
  }
  REQUIRE(parser.finish().ok());
  return events;
}

}  // namespace

TEST_CASE("server-sent events split at any byte parse the same", "[client]") {
  std::string stream =
      ": keep-alive comment\n\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\ndata: {\"b\":2}\r\n\r\n"
      "data:no-space\n\n"
      "data: line one\ndata: line two\nid: 7\n\n"
      "data: [DONE]\n\n";
  std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "no-space", "line one\nline two", "[DONE]"};
  for (size_t step = 1; step <= stream.size(); ++step) {
    INFO("step " << step);
    CHECK(parse(stream, step) == expected);
  }
}

TEST_CASE("an event without its closing blank line is delivered at the end of the body", "[client]") {
  CHECK(parse("data: last", 3) == std::vector<std::string>{"last"});
  CHECK(parse("data: a\n\n\n\n", 1) == std::vector<std::string>{"a"});
}

TEST_CASE("the event handler's error stops parsing and an endless line is a protocol error", "[client]") {
  int calls = 0;
  SseParser parser([&](std::string_view) {
    ++calls;
    return Outcome::failure(HEARTH_ERR_CANCELLED, "stop");
  });
  std::string two = "data: 1\n\ndata: 2\n\n";
  CHECK(parser.feed(two.data(), two.size()).code == HEARTH_ERR_CANCELLED);
  CHECK(calls == 1);

  SseParser endless([](std::string_view) { return Outcome::success(); });
  std::string block(1 << 20, 'x');
  Outcome o;
  for (int i = 0; i < 20 && o.ok(); ++i) o = endless.feed(block.data(), block.size());
  CHECK(o.code == HEARTH_ERR_PROTOCOL);
}
