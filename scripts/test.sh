#!/usr/bin/env bash
# The README's test command: configure, build, run every CPU test (GPU tests report that they skipped when
# there is no driver), then build the example consumer against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SWAPJIT_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
# A private cache so tests never touch the user's.
export SWAPJIT_CACHE_DIR="$PWD/build/test-cache"
ctest --test-dir build --output-on-failure --verbose
if [ -d examples/consumer ] && [ -f examples/consumer/CMakeLists.txt ]; then
  rm -rf build/install build/consumer
  cmake --install build --prefix build/install >/dev/null
  cmake -S examples/consumer -B build/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
  cmake --build build/consumer -j"$jobs"
  LD_LIBRARY_PATH="$PWD/build/install/lib" build/consumer/swapjit_consumer
fi
echo "all tests passed"
