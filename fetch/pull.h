// hearth pull: a model from the Hugging Face Hub (or a mirror) into the models folder.
//
// The name is resolved to files through the Hub's API (hub.h), each file is downloaded to
// <models>/.downloads/FILE.part (resumed with a Range request when a part is there), its
// GGUF header checked as soon as its first bytes arrive (a model whose architecture hearth
// cannot run stops the download), its SHA-256 compared with the Hub's, and only then renamed
// into the models folder. A failure leaves nothing in the models folder; a broken connection
// leaves the .part for the next pull to resume (after three tries in a row; a server error
// too); a wrong checksum or a refused architecture deletes it. A split model's parts are each
// verified in the download area, then joined into one file (gguf_join.h). One pull of a file
// at a time (the .part is locked). A repo-and-quantization name is recorded with the file it
// chose (pulled.h), so that it names the installed file without the network.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth::fetch {

struct PullEvent {
  enum class Kind {
    kResolving,    // asking the Hub for the file list (file: the repo)
    kDownloading,  // completed of total bytes of file
    kVerifying,    // computing the SHA-256 of file
    kMessage,      // text: a line for the user (a retry, a resume)
  };
  Kind kind = Kind::kResolving;
  std::string file;
  std::string sha256;  // of file, when known
  uint64_t completed = 0;
  uint64_t total = 0;
  std::string text;
};

struct PullOptions {
  std::string models_dir;
  std::string endpoint;                            // "" = HF_ENDPOINT, else https://huggingface.co
  std::string token;                               // "" = HF_TOKEN
  std::function<void(const PullEvent&)> on_event;  // may be empty; called on the caller's thread
  int timeout_s = 60;                              // connecting and each read
  // Set from another thread to stop the pull (a client of /api/pull that left): seen between
  // pieces of the body and between tries, so within one read (at most timeout_s on a server
  // that sends nothing). The .part stays in the download area for the next pull to resume.
  const std::atomic<bool>* cancel = nullptr;
};

struct PullResult {
  std::string path;  // in the models folder
  std::string file;  // its name
  std::string arch;  // general.architecture
  std::string sha256;
  uint64_t bytes = 0;
  bool already_installed = false;  // the verified file was there
};

// The error message of a pull stopped by PullOptions::cancel.
inline constexpr const char* kPullCancelled = "the pull was cancelled";

// name: a hub name (hub.h) or a name of the Hub catalog (hub_catalog.h).
Result<PullResult> pull_model(std::string_view name, const PullOptions& options);

// Where the .part files wait: <models_dir>/.downloads
std::string download_dir(const std::string& models_dir);

}  // namespace hearth::fetch
