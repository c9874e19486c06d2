// POST /api/pull as Ollama streams it: NDJSON lines, one JSON object each,
//   {"status":"pulling manifest"}                                       (asking for the files)
//   {"status":"pulling 3f2a…","digest":"sha256:…","total":N,"completed":M}  (a file's bytes)
//   {"status":"verifying sha256 digest"}
//   {"status":"success"}
// and {"error":"…"} as the last line when it fails (the status stays 200: the stream has
// begun). With "stream": false, one object: {"status":"success"}, or {"error":"…"} with 500.
// The download itself is the daemon's ModelPuller (ipc/model_puller.h), on a thread of the
// connection (handler.h StreamCall).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ipc/handler.h"
#include "ipc/model_puller.h"

namespace hearth::ipc {

// Turns pull progress into Ollama's lines (each ending in '\n'). Downloading lines of a file
// are thinned to one per kMinInterval, but its first and its last (completed == total) always
// come, so a client's progress bar starts and ends right.
class OllamaPullLines {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMinInterval{100};

  // The line for p at time now, or nullopt when it is thinned out.
  std::optional<std::string> line(const PullProgress& p, Clock::time_point now);
  static std::string success();
  static std::string error(const std::string& message);

 private:
  std::map<std::string, Clock::time_point> last_;  // by file: when its last Downloading line went
};

// The StreamCall of one pull of name through puller.
StreamCall ollama_pull_call(std::shared_ptr<ModelPuller> puller, std::string name, bool stream);

}  // namespace hearth::ipc
