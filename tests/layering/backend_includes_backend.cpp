// Compiled with only the backends layer's include root (tests/layering/CMakeLists.txt): what
// a backend may include compiles.
#include "backends/backend.h"

#include "common/result.h"

int main() {
  return 0;
}
