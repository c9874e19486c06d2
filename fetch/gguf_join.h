// Joins a split GGUF (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf ...) into one file,
// the form hearth's loader reads. The first part holds the model's metadata; every part holds
// split.no, split.count and split.tensors.count and some of the tensors. The joined file has
// the first part's metadata without the split.* keys, every part's tensors in order (their
// infos copied byte for byte but for the offset), and their data at offsets aligned as
// general.alignment says.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace hearth::fetch {

// parts in order; out is written whole (then fsynced) and checked by opening it with the
// GGUF reader. An error names the part and what is wrong (a missing or foreign part, a
// tensor count that does not add up).
Status join_split_gguf(const std::vector<std::string>& parts, const std::string& out);

}  // namespace hearth::fetch
