// The internal result of a library operation: a hearth status code (see hearth/client.h) and,
// when it is not HEARTH_OK, a message for hearth_client_last_error().
#pragma once

#include <string>
#include <utility>

#include "hearth/client.h"

namespace hearth::client {

struct Outcome {
  int code = HEARTH_OK;
  std::string message;

  bool ok() const { return code == HEARTH_OK; }
  static Outcome success() { return {}; }
  static Outcome failure(int code, std::string message) { return {code, std::move(message)}; }
};

}  // namespace hearth::client
