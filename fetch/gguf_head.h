// The architecture of a GGUF file read from its first bytes, so that a download can stop as
// soon as the header shows a model hearth cannot run (the reader in engine/gguf needs the
// whole file: it checks every tensor against it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

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

// Where the parts of a whole GGUF header lie: each key/value pair and each tensor info (whose
// last 8 bytes are its data offset), as byte ranges [begin, end) from the file's start.
struct GgufLayout {
  struct Range {
    std::string key;  // the key, or the tensor's name
    size_t begin = 0;
    size_t end = 0;
  };
  uint32_t version = 0;
  std::vector<Range> kvs;
  std::vector<Range> tensors;
};
Result<GgufLayout> gguf_layout(const uint8_t* data, size_t n);

}  // namespace hearth::fetch
