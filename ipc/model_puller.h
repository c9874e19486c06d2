// Downloading a model into the models folder for POST /api/pull. The daemon implements
// ModelPuller over its downloader (fetch/pull.h), which sits beside ipc, not below it
// (DESIGN.md: the daemon and the CLI use it): ipc only asks, as it asks a ModelHost.
//
// Thread-safety: pull() may be called from any thread, several at once (two pulls of one
// file: the second is refused by the downloader's lock). It blocks for the whole download:
// call it off the io thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"

namespace hearth::ipc {

// How a pull goes, one step at a time.
struct PullProgress {
  enum class Kind {
    Resolving,    // asking the Hub which files the name means
    Downloading,  // completed of total bytes of file
    Verifying,    // computing file's SHA-256
    Message,      // text: a line for the user (a retry, a resume, a join)
  };
  Kind kind = Kind::Resolving;
  std::string file;
  std::string sha256;  // of file (lower-case hex), when known
  uint64_t completed = 0;
  uint64_t total = 0;
  std::string text;
};

class ModelPuller {
 public:
  virtual ~ModelPuller() = default;
  // Downloads the model name means (a catalog name, hf.co/ORG/REPO:QUANT, a Hub URL) into the
  // models folder, verified, and makes it servable; the installed file's path, or why not (a
  // whole message). on_progress is called on the calling thread. cancelled is read between
  // pieces of the download: once true, pull returns an error soon and installs nothing.
  virtual Result<std::string> pull(const std::string& name, const std::function<void(const PullProgress&)>& on_progress,
                                   const std::atomic<bool>& cancelled) = 0;
};

}  // namespace hearth::ipc
