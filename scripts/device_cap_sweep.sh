#!/usr/bin/env bash
# device_cap_sweep.sh: the swap-AB head-split caps (include/swapjit/decode_attention.hpp) re-measured in one
# device call: `swapjit bench` of the small steps (16 and 32 heads, warm, per call) under the default caps and
# under each setting given, so that every row's split / unsplit choice sits beside the others from the same
# machine. Usage (repository root; builds build-dev like device_run.sh):
#   scripts/device_cap_sweep.sh "S2 S4" ...   e.g. "0 0" (never split) "8 4" (split wherever a key exists)
# SWAPJIT_SWEEP_TOKENS: the step sizes (default 1,2,3,4,5,6,8). SWAPJIT_SWEEP_TREES="name=dir ...": the source
# trees swept, one after another (default "base=."; e.g. an alt tree of scripts/alt_tree.sh beside this one).
# Output: $OUT/caps-<tree>-default.json, $OUT/caps-<tree>-<S2>-<S4>.json and the bench tables in $OUT/caps.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
common=(--no-jit --no-cold --no-step --heads 16,32 --tokens "${SWAPJIT_SWEEP_TOKENS:-1,2,3,4,5,6,8}" --replays 20)
rc=0
for tree in ${SWAPJIT_SWEEP_TREES:-base=.}; do
  name=${tree%%=*} dir=${tree#*=}
  export SWAPJIT_CACHE_DIR=$PWD/$dir/build-dev/swapjit-cache
  cmake -S "$dir" -B "$dir/build-dev" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$dir/build-dev" -j16 --target swapjit_cli >/dev/null || { rc=1; continue; }
  cli=$dir/build-dev/bin/swapjit
  echo "=== tree $name: default caps" >>"$OUT/caps.log"
  "$cli" bench "${common[@]}" --json "$OUT/caps-$name-default.json" >>"$OUT/caps.log" 2>&1 || rc=1
  for caps in "$@"; do
    read -r s2 s4 <<<"$caps"
    echo "=== tree $name: caps split=$s2 split4=$s4" >>"$OUT/caps.log"
    "$cli" bench "${common[@]}" --split-max-tokens "$s2" --split4-max-tokens "$s4" \
      --json "$OUT/caps-$name-$s2-$s4.json" >>"$OUT/caps.log" 2>&1 || rc=1
  done
done
exit $rc
