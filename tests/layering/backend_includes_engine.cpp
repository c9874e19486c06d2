// Compiled with only the backends layer's include root (tests/layering/CMakeLists.txt): a
// backend that includes the engine must not compile (DESIGN.md: dependencies point down).
#include "backends/backend.h"
#include "engine/model/model.h"

int main() {
  return 0;
}
