#!/usr/bin/env bash
# The README's main command on a fresh machine: install what is missing, build, precompile the keys of a
# model preset into the cache (default: v4.1-flash at TP2 and TP4 for sm_90a), and on a GPU also check the
# decode step against the fp64 reference and time it.
#   scripts/main_job.sh [PRESET] [TP_LIST]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-v4.1-flash}
tp=${2:-2,4}
if [ "${SWAPJIT_SKIP_INSTALL:-0}" != 1 ]; then
  need=()
  for pkg in cmake g++ make libfmt-dev nlohmann-json3-dev catch2 libcli11-dev libssl-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
  fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
build/bin/swapjit info
build/bin/swapjit precompile --preset "$preset" --tp "$tp" --arch sm_90a
if build/bin/swapjit info 2>/dev/null | grep -q "^  gpu 0:"; then
  build/bin/swapjit check --cases 64
  build/bin/swapjit bench
else
  echo "no GPU on this machine: precompiled only (check and bench need a GPU)"
fi
