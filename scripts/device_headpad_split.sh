#!/usr/bin/env bash
# device_headpad_split.sh: one device call measuring the head-padded kernel's head split (session 22): build the
# CLI, check the 64- and 128-head cases with every step split four ways and then two ways (and a racecheck of one
# split case), then the quick bench at 64 heads unsplit, split four ways and split two ways at T = 1..16, each
# into $OUT. Usage (repository root): OUT=... scripts/device_headpad_split.sh
# HS_SKIP_CHECK=1 skips the checks; HS_HEADS, HS_TOKENS, HS_PAIRS set the bench's --heads, --tokens, --pairs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
echo "kernels_src sha256: $(cat kernels_src/*.cuh | sha256sum | cut -c1-16)"
date -u
B=build-dev
export SWAPJIT_CACHE_DIR=$PWD/$B/swapjit-cache
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { echo configure failed; exit 1; }
cmake --build $B -j16 --target swapjit_cli > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
C=$B/bin/swapjit
CASES=hp0,hp1,hp2,hp5,hp6,hp7,qs1
rc=0
if [ "${HS_SKIP_CHECK:-0}" != 1 ]; then
  timeout 150 $C check --kernel headpad --only $CASES --headpad-split4-max-tokens 64 --json "$OUT/check-split4.json" || rc=1
  timeout 150 $C check --kernel headpad --only $CASES --headpad-split-max-tokens 64 --json "$OUT/check-split2.json" || rc=1
  timeout 100 compute-sanitizer --tool racecheck $C check --kernel headpad --only qs1 --headpad-split4-max-tokens 64 \
    > "$OUT/racecheck-split4.log" 2>&1 || rc=1
  tail -5 "$OUT/racecheck-split4.log"
fi
for cfg in "base --headpad-split4-max-tokens 0" "split4 --headpad-split4-max-tokens 1024" \
  "split2 --headpad-split-max-tokens 1024"; do
  set -- $cfg
  name=$1
  shift
  timeout 200 $C bench --no-jit --no-cold --no-step --heads ${HS_HEADS:-64} --tokens ${HS_TOKENS:-1,2,4,8,16} \
    --pairs ${HS_PAIRS:-0,1,2} "$@" --json "$OUT/bench-$name.json" \
    > "$OUT/bench-$name.log" 2>&1 || rc=1
  grep -E 'compressed|swa_only' "$OUT/bench-$name.log" | head -40
done
echo "rc=$rc"
exit $rc
