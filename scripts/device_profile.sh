#!/usr/bin/env bash
# device_profile.sh: Nsight Compute on the H200 for one launch of each decode kernel, from the repo root:
#   scripts/device_profile.sh [HEADS] [TOKENS] [KERNELS] (default 16 1 "swapab_decode headpad_decode")
# Builds the CLI (build-dev, as device_run.sh), then profiles `swapjit bench` (one shape, warm L2 only)
# with the launch, occupancy, speed-of-light, warp-state and source-counter sections, and writes per
# kernel: $OUT/<kernel>-details.txt (the sections as text) and $OUT/<kernel>-source.csv (per-SASS-instruction stall samples, with the CUDA source line from -lineinfo).
# Read the source CSV with scripts/ncu_report.py (phases between barriers, or hot source lines).
# SWAPJIT_NCU_CACHE=all|none (default none): ncu's --cache-control. `all` flushes every cache before the
# profiled launch (session 4 run 7: a 7.7 us launch took 15.6 us, 24 % of its samples instruction fetch);
# `none` profiles the warm state the bench measures.
set -uo pipefail
cd "$(dirname "$0")/.."
heads=${1:-16}
tokens=${2:-1}
kernels=${3:-swapab_decode headpad_decode}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/profile.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
BUILD=build-dev
export SWAPJIT_CACHE_DIR=$PWD/$BUILD/swapjit-cache
{ git rev-parse HEAD 2>/dev/null || echo "no git metadata in this copy"; } | sed 's/^/commit: /'
date -u
cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build $BUILD -j16 --target swapjit_cli | tail -1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
bench=($BUILD/bin/swapjit bench --heads "$heads" --tokens "$tokens" --no-cold --no-step --no-jit --replays 3)
for k in $kernels; do
  # Skip the first launches (warmup) and take one from the timed graphs of the first layer.
  timeout 240 "$NCU" --clock-control none --cache-control "${SWAPJIT_NCU_CACHE:-none}" --warp-sampling-interval 0 --graph-profiling node -k "regex:${k}" --launch-skip 8 --launch-count 1 \
    --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
    --import-source yes -f -o "/tmp/$k" "${bench[@]}" 2>&1 | tail -8
  echo "$k: ncu rc=${PIPESTATUS[0]}"
  "$NCU" --import "/tmp/$k.ncu-rep" --page details >"$OUT/$k-details.txt" 2>&1
  "$NCU" --import "/tmp/$k.ncu-rep" --page source --csv --print-source sass,cuda >"$OUT/$k-source.csv" 2>&1
  grep -E "Duration|Registers|Warp Cycles Per Issued|Stall|Achieved Occupancy|Block Limit|Cluster" "$OUT/$k-details.txt" | head -40
done
