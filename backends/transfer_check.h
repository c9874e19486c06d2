// The checks every backend runs on a transfer before it touches memory: the range lies
// inside the buffer (without overflow), and a copy inside one buffer does not overlap
// itself. Whether a buffer belongs to the backend is the backend's own check.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "backends/backend.h"

namespace hearth {

inline Status check_range(std::string_view backend, std::string_view what, const Buffer* b, size_t offset,
                          size_t bytes) {
  if (b == nullptr) return make_error(std::string(backend) + ": " + std::string(what) + " names no buffer");
  if (offset > b->bytes() || bytes > b->bytes() - offset)
    return make_error(std::string(backend) + ": " + std::string(what) + " of " + std::to_string(bytes) +
                      " bytes at offset " + std::to_string(offset) + " is outside a buffer of " +
                      std::to_string(b->bytes()) + " bytes");
  return {};
}

inline Status check_copy(std::string_view backend, const BufferCopy& c) {
  if (Status st = check_range(backend, "copy source", c.src, c.src_offset, c.bytes); !st) return st;
  if (Status st = check_range(backend, "copy destination", c.dst, c.dst_offset, c.bytes); !st) return st;
  if (c.src == c.dst && c.bytes > 0 && c.src_offset < c.dst_offset + c.bytes && c.dst_offset < c.src_offset + c.bytes)
    return make_error(std::string(backend) + ": a copy of " + std::to_string(c.bytes) + " bytes from offset " +
                      std::to_string(c.src_offset) + " to offset " + std::to_string(c.dst_offset) + " overlaps itself");
  return {};
}

}  // namespace hearth
