// An upstream's answer re-framed for hearth's clients (issue 45): the events of an OpenAI
// SSE stream passed on as they arrive, whole events only, with the model named as hearth's
// clients name it and hearth's "timings" — measured here, at the front: ttft_ms, decode_ms,
// decode_tok_s, itl_ms {mean, p50, p95, max}, as a local answer's — on the chunk that
// finishes the answer (and on the usage chunk). An upstream hearthd's own timings move to
// timings.upstream_timings, its cached_tokens and prefilled_tokens are copied up. No I/O:
// the forwarding route (api/upstream_forward.h) feeds the bytes.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler/request.h"

namespace hearth::ipc {

// hearth's timings of an upstream's answer as the front sees it: ttft_ms from sent to the
// first piece of content, decode_ms from there to the last, decode_tok_s and the gaps
// between pieces (itl_*), pieces standing for tokens. Zero when no content came.
RequestTimings front_timings(std::chrono::steady_clock::time_point sent,
                             const std::vector<std::chrono::steady_clock::time_point>& pieces);

// Splits a server-sent-events byte stream into its events, whole events only, whatever
// the cuts between the pieces fed (the WHATWG EventSource rules: a line ends in CRLF, LF or
// CR; an empty line ends an event; an event with no line is no event).
class SseFramer {
 public:
  struct Event {
    std::vector<std::string> fields;  // its lines other than data (comments, event:, id:), in order
    std::optional<std::string> data;  // its data lines' values joined with "\n"; nullopt: none
  };

  // The events that bytes completes. Bytes of an unfinished event are kept (too_big() once
  // they pass max_event_bytes).
  std::vector<Event> feed(std::string_view bytes);
  bool too_big() const { return too_big_; }

  static constexpr size_t max_event_bytes = 1 << 20;

 private:
  void end_line(std::vector<Event>* out);

  std::string line_;       // the line being read
  Event event_;            // the event being read
  bool has_line_ = false;  // event_ has a line
  size_t event_bytes_ = 0;
  bool skip_lf_ = false;  // the last byte was a CR: an LF right after it ends no other line
  bool too_big_ = false;
};

class SseRelay {
 public:
  using Clock = std::chrono::steady_clock;

  // model_id: hearth's name of the model; upstream: the upstream's name; sent: when the
  // request went out (TTFT counts from there).
  SseRelay(std::string model_id, std::string upstream, Clock::time_point sent);

  // Bytes of the upstream's body -> the bytes to send on (whole events; a partial one is
  // kept for the next call). An event over 1 MiB without its end is an error (broken()).
  std::string feed(std::string_view bytes, Clock::time_point now);

  bool done() const { return done_; }  // the upstream sent [DONE] or an error event
  const std::string& broken() const { return broken_; }

  // The end of a stream the upstream broke off: an error event, then [DONE], so no client
  // takes the text so far for a whole answer.
  static std::string broken_event(const std::string& message);

 private:
  std::string event(const SseFramer::Event& ev, Clock::time_point now);
  std::string timings_json() const;

  std::string model_id_;
  std::string upstream_;
  Clock::time_point sent_;
  SseFramer framer_;
  std::vector<Clock::time_point> tokens_;  // when each chunk with content arrived
  bool done_ = false;
  std::string broken_;
};

// A whole (not streamed) answer: "model" renamed, "timings" added ({"upstream", "ttft_ms":
// the answer's first byte, "total_ms"}); a body that is not a JSON object is kept as is.
std::string relay_whole(const std::string& body, const std::string& model_id, const std::string& upstream,
                        double first_byte_ms, double total_ms);

}  // namespace hearth::ipc
