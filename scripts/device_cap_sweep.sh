#!/usr/bin/env bash
# device_cap_sweep.sh: the swap-AB head-split caps (include/swapjit/decode_attention.hpp) re-measured in one
# device call: `swapjit bench` of the small steps (16 and 32 heads, T = 1-8, warm, per call) under the default
# caps and under each setting given, so that every row's split / unsplit choice sits beside the others from
# the same machine. Usage (repository root; builds build-dev like device_run.sh):
#   scripts/device_cap_sweep.sh "S2 S4" ...   e.g. "0 0" (never split) "8 4" (split wherever a key exists)
# Output: $OUT/caps-default.json, $OUT/caps-<S2>-<S4>.json and the bench tables in $OUT/caps.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
export SWAPJIT_CACHE_DIR=$PWD/build-dev/swapjit-cache
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-dev -j16 --target swapjit_cli >/dev/null || exit 1
common=(--no-jit --no-cold --no-step --heads 16,32 --tokens 1,2,3,4,5,6,8 --replays 20)
rc=0
build-dev/bin/swapjit bench "${common[@]}" --json "$OUT/caps-default.json" >>"$OUT/caps.log" 2>&1 || rc=1
for caps in "$@"; do
  read -r s2 s4 <<<"$caps"
  echo "=== caps split=$s2 split4=$s4" >>"$OUT/caps.log"
  build-dev/bin/swapjit bench "${common[@]}" --split-max-tokens "$s2" --split4-max-tokens "$s4" \
    --json "$OUT/caps-$s2-$s4.json" >>"$OUT/caps.log" 2>&1 || rc=1
done
exit $rc
