#!/usr/bin/env bash
# device_probe.sh: builds and runs the standalone probes of tools/probes/ on the device machine (nvcc,
# sm_90a), output to $OUT/probe-<name>.txt. Usage: scripts/device_probe.sh [probe ...] (default: all).
# The probes are questions about the hardware, not part of the library (docs/perf-notes.md says which
# session asked what and what they answered).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" build-probes
export PATH=/usr/local/cuda/bin:$PATH
probes=("$@")
[ ${#probes[@]} -eq 0 ] && probes=($(cd tools/probes && ls *.cu | sed 's/\.cu$//'))
rc=0
for p in "${probes[@]}"; do
  echo "=== probe $p ==="
  if nvcc -std=c++20 -arch=sm_90a -O3 -o "build-probes/$p" "tools/probes/$p.cu"; then
    timeout 120 "build-probes/$p" | tee "$OUT/probe-$p.txt" || rc=1
  else
    rc=1
  fi
done
exit $rc
