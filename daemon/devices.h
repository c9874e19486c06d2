// Which compute backends this hearthd has, and making the one the configuration asks for.
// Today only the CPU backend is built in; vulkan and cuda are named so that --backend and
// --list-devices can say so plainly.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/result.h"

namespace hearth::daemon {

// Whether `choice` ("auto", "cpu", "vulkan", "cuda") can be served by this build; an error
// saying the backend is not built into this hearthd otherwise (exit code 2 for the caller).
Status check_backend_available(const std::string& choice);

// Creates the backend for `choice` (auto: the best one built in, logging one line on why
// the others were not chosen). threads: CPU worker threads, 0 = one per physical core.
Result<std::unique_ptr<Backend>> make_backend(const std::string& choice, int threads);

// One line per device this build has (name, kind, memory, threads, SIMD level), then one
// line per backend not built in. Creates (and destroys) the CPU backend to ask it.
std::string list_devices(int threads);

}  // namespace hearth::daemon
