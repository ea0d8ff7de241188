// skip_without_gpu.hpp: GPU tests return early, saying so, on a machine without a driver. ctest reports the
// run as skipped on the "SKIPPED: no GPU driver" line (cmake/catch2.cmake); Catch2 2.x has no SKIP().
#pragma once
#include <cstdio>
#include <string>

#include "tools/gpu_harness.hpp"

namespace swapjit::testing {

inline bool no_gpu(const char* test) {
  std::string why;
  if (harness::gpu_available(&why)) return false;
  std::printf("SKIPPED: no GPU driver (%s): %s\n", test, why.c_str());
  return true;
}

}  // namespace swapjit::testing
