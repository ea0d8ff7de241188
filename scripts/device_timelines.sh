#!/usr/bin/env bash
# device_timelines.sh: `swapjit timeline` of several (kernel, heads, tokens) points in several source trees, in
# one device call, so that a variant's phases sit beside the base tree's from the same machine:
#   SWAPJIT_TIMELINE_TREES="base=. ss=alt/ss" scripts/device_timelines.sh swapab:16:1 swapab:32:16 headpad:64:1
# Each tree gets its own CLI build (in parallel) and cubin cache; output: $OUT/timeline-<tree>-<kernel>-h<H>-t<T>.txt.
# The points are `kernel:heads:tokens` (the v41_fp8 pairing of the compressed layer, the timeline's default).
# SWAPJIT_TIMELINE_ARGS: more `swapjit timeline` options for every point, e.g. "--lean" (no per-warp points,
# whose own loop delays thread 0's later stamps) or "--kv v41_fp8+v41_fp4".
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
trees=${SWAPJIT_TIMELINE_TREES:-base=.}
rc=0
declare -A pid
for tr in $trees; do
  name=${tr%%=*} dir=${tr#*=}
  ( cmake -S "$dir" -B "$dir/build-dev" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$dir/build-dev" -j8 --target swapjit_cli >/dev/null ) >"$OUT/build-$name.log" 2>&1 &
  pid[$name]=$!
done
for tr in $trees; do
  name=${tr%%=*} dir=${tr#*=}
  if ! wait "${pid[$name]}"; then
    echo "=== $name: build failed ($OUT/build-$name.log) ==="
    tail -20 "$OUT/build-$name.log"
    rc=1
    continue
  fi
  for pt in "$@"; do
    IFS=: read -r kernel heads tokens <<<"$pt"
    f="$OUT/timeline-$name-$kernel-h$heads-t$tokens.txt"
    echo "=== $name: timeline $kernel heads $heads tokens $tokens ==="
    SWAPJIT_CACHE_DIR="$PWD/$dir/build-dev/swapjit-cache" timeout 120 "$dir/build-dev/bin/swapjit" timeline \
      --kernel "$kernel" --heads "$heads" --tokens "$tokens" ${SWAPJIT_TIMELINE_ARGS:-} >"$f" 2>&1 || rc=1
    cat "$f"
  done
done
exit $rc
