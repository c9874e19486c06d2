// The architecture of a GGUF file read from its first bytes, so that a download can stop as
// soon as the header shows a model hearth cannot run (the reader in engine/gguf needs the
// whole file: it checks every tensor against it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hearth::fetch {

struct GgufHead {
  enum class State {
    kNeedMore,  // the bytes end before general.architecture: give more
    kFound,     // arch holds general.architecture
    kBad,       // not a GGUF file, or its header is damaged: error says how
  };
  State state = State::kNeedMore;
  std::string arch;
  std::string error;
};

// Reads the header's key/value pairs from data[0, n) (the start of a file) until
// general.architecture. Every length is checked against n; a string key or value longer than
// 1 MiB is damage, not a reason to wait.
GgufHead read_gguf_head(const uint8_t* data, size_t n);

}  // namespace hearth::fetch
