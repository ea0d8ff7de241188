#!/usr/bin/env bash
# device_split_caps.sh: one device call timing head splits side by side (both kernels' caps and tables), with
# optional checks first. Builds the CLI, runs each SPLIT_CHECKS entry as `swapjit check ARGS` and SPLIT_RACECHECK
# as `compute-sanitizer --tool racecheck swapjit check ARGS`, then the quick bench (no JIT, no cold caches, no
# steps) with the defaults and with each "NAME ARGS..." of SPLIT_CONFIGS, into $OUT/bench-NAME.json.
# Lists are ';'-separated; SPLIT_BENCH_ARGS goes to every bench (e.g. "--topk 1024"). Usage (repository root),
# e.g. session 22's runs:
#   SPLIT_HEADS=32 SPLIT_TOKENS=2,3,4 SPLIT_CONFIGS="two --split4-max-tokens 0" OUT=... scripts/device_split_caps.sh
#   SPLIT_HEADS=64 SPLIT_CHECKS="--kernel headpad --only hp0,qs1 --headpad-split4-max-tokens 64" \
#     SPLIT_CONFIGS="split4 --headpad-split4-max-tokens 1024;split2 --headpad-split-max-tokens 1024" ...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
echo "kernels_src sha256: $(cat kernels_src/*.cuh | sha256sum | cut -c1-16)"
date -u
B=build-dev
C=$B/bin/swapjit
export SWAPJIT_CACHE_DIR=$PWD/$B/swapjit-cache
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { echo configure failed; exit 1; }
cmake --build $B -j16 --target swapjit_cli > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
rc=0
IFS=';' read -ra checks <<< "${SPLIT_CHECKS:-}"
i=0
for chk in "${checks[@]}"; do
  [ -z "$chk" ] && continue
  read -ra args <<< "$chk"
  i=$((i + 1))
  timeout 150 $C check "${args[@]}" --json "$OUT/check-$i.json" | tail -3 || rc=1
done
if [ -n "${SPLIT_RACECHECK:-}" ]; then
  read -ra args <<< "$SPLIT_RACECHECK"
  timeout 100 compute-sanitizer --tool racecheck $C check "${args[@]}" > "$OUT/racecheck.log" 2>&1 || rc=1
  tail -2 "$OUT/racecheck.log"
fi
IFS=';' read -ra configs <<< "default;${SPLIT_CONFIGS:-}"
for cfg in "${configs[@]}"; do
  [ -z "$cfg" ] && continue
  read -ra args <<< "$cfg"
  name=${args[0]}
  timeout 200 $C bench --no-jit --no-cold --no-step --heads ${SPLIT_HEADS:-16,32} --tokens ${SPLIT_TOKENS:-1,2,4,8} \
    --pairs ${SPLIT_PAIRS:-0,1,2} ${SPLIT_BENCH_ARGS:-} "${args[@]:1}" --json "$OUT/bench-$name.json" > "$OUT/bench-$name.log" 2>&1 || rc=1
  grep -E '^(comp|swa) ' "$OUT/bench-$name.log" | sed "s/^/$name: /"
done
echo "rc=$rc"
exit $rc
