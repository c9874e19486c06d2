// Incremental parser for server-sent events (the subset hearthd and OpenAI use): bytes go in
// as they arrive, split anywhere; each complete event's data comes out once. Lines end in
// "\n" or "\r\n"; "data:" lines of one event are joined with "\n" (one space after the colon
// is dropped); a blank line ends the event; comment lines (":...") and other fields
// ("event:", "id:", "retry:") are ignored.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "outcome.h"

namespace hearth::client {

class SseParser {
 public:
  // Called with each event's data. A non-OK Outcome stops parsing and is returned by feed().
  using EventFn = std::function<Outcome(std::string_view data)>;

  // A line or an event longer than this is a protocol error (bounds memory on a bad peer).
  static constexpr size_t kMaxEventBytes = 16u << 20;

  explicit SseParser(EventFn on_event) : on_event_(std::move(on_event)) {}

  Outcome feed(const char* bytes, size_t size);
  // At the end of the body: dispatches an event that lacked its closing blank line.
  Outcome finish();

 private:
  Outcome process_line(std::string_view line);

  EventFn on_event_;
  std::string line_;  // the incomplete line so far
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
};

}  // namespace hearth::client
