// The events of a whole server-sent-events text as a plain client reads them, for the fuzz
// targets of the upstream relays (written apart from the relays' own framer, SseFramer, so
// that it checks it): lines end in CRLF, LF or CR; an empty line ends an event, which has at
// least one line; a last event without its empty line is not one yet.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::test {

struct SseEvent {
  std::string type;                 // its event: field ("" when none)
  std::optional<std::string> data;  // its data lines joined with "\n"; nullopt: none
};

inline std::vector<SseEvent> read_sse_events(std::string_view text) {
  std::vector<SseEvent> out;
  SseEvent ev;
  bool has_line = false;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find_first_of("\r\n", at);
    if (end == std::string_view::npos) break;
    std::string_view line = text.substr(at, end - at);
    at = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
    if (line.empty()) {
      if (has_line) out.push_back(std::move(ev));
      ev = SseEvent{};
      has_line = false;
      continue;
    }
    has_line = true;
    if (line.substr(0, 6) == "event:") ev.type = std::string(line.substr(line.size() > 6 && line[6] == ' ' ? 7 : 6));
    if (line.substr(0, 5) != "data:") continue;  // a bare "data" line is not read as data (nor by SseFramer)
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    ev.data = ev.data ? *ev.data + "\n" + std::string(line) : std::string(line);
  }
  return out;
}

}  // namespace hearth::test
