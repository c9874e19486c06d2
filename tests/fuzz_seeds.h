// The seeds of hearth's libFuzzer targets (scripts/fuzz): run with HEARTH_FUZZ_WRITE_SEEDS=DIR,
// a target writes its seed inputs into DIR and exits instead of fuzzing. Each target's
// LLVMFuzzerInitialize calls write_seeds_if_asked first.
#pragma once

#include <cstdlib>

namespace hearth::test {

// When HEARTH_FUZZ_WRITE_SEEDS names a directory: write(that directory, as a const char*)
// fills it, then the process exits 0. Otherwise nothing happens.
template <class Write>
void write_seeds_if_asked(Write write) {
  const char* dir = std::getenv("HEARTH_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  write(dir);
  std::exit(0);
}

}  // namespace hearth::test
