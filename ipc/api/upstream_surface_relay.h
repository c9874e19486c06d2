// One forwarded answer of Ollama's or Anthropic's routes for an upstream model (issue 45):
// the upstream's status and body as they arrive, read by OpenAiAnswerReader
// (upstream_translate.h) into the events the surface's own ResponseWriter writes, emitted as
// soon as they are ready. upstream_surfaces.cpp runs one per request; the fuzz target
// tests/ipc/upstream_answer_fuzz.cpp drives the same class with an upstream's bytes.
//
// A streamed answer always ends with exactly one of: the writer's end (Done) — only when the
// upstream said how the answer finished ([DONE], or a finish_reason and an unbroken
// connection) — or an error event naming the upstream. Nothing is written after it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "ipc/api/upstream_translate.h"
#include "ipc/handler.h"
#include "ipc/upstream_relay.h"

namespace hearth::ipc {

class SurfaceRelay {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;

  // upstream: its name, in errors and timings; emit outlives the relay; now: the clock the
  // timings are measured with (the request counts as sent when the relay is made).
  SurfaceRelay(std::string upstream, std::unique_ptr<ResponseWriter> writer, const StreamCall::Emit& emit,
               Now now = Clock::now);

  // The upstream's status: a 200 to a streamed request is written as it arrives (its
  // opening, Anthropic's message_start, once the first event was read: an upstream that
  // counts the prompt in it, continuous_usage_stats, gives message_start its input_tokens);
  // any other answer is kept whole for finish().
  bool head(int status);
  // Bytes of the body; false stops the exchange (a whole answer over 64 MiB, an event over
  // 1 MiB).
  bool data(const char* bytes, size_t n);
  // After the exchange (broken: why it ended early, "" when it did not; cancelled: the
  // client left): what the connection sends. Streamed, the rest of the answer was emitted.
  HttpResponse finish(std::string broken, bool cancelled);

 private:
  void write(const std::vector<ApiEvent>& events);
  HttpResponse whole(const std::string& broken);

  std::string upstream_;
  std::unique_ptr<ResponseWriter> writer_;
  const StreamCall::Emit& emit_;
  Now now_;
  Clock::time_point sent_;
  Clock::time_point first_byte_;
  OpenAiAnswerReader reader_;
  SseFramer framer_;
  int status_ = 0;
  bool streaming_ = false;  // a 200 stream: events written as they come
  bool opened_ = false;     // the writer's open() sent: at the first event of the stream
  bool ended_ = false;      // Done or Error written
  std::string whole_;       // not streaming: the body
};

}  // namespace hearth::ipc
