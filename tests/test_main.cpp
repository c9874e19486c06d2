// Catch2's main, after one piece of set-up every test binary shares.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

int main(int argc, char* argv[]) {
  // lavapipe (Mesa's software Vulkan device) starts one worker thread per CPU. The Vulkan
  // tests are declared to ctest as using 2 cores (PROCESSORS in tests/CMakeLists.txt);
  // (HEARTH_TEST_CORES) pin lavapipe to that, whatever the machine, unless the caller chose a number.
  setenv("LP_NUM_THREADS", HEARTH_TEST_CORES, /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
