#!/usr/bin/env bash
# device_split_caps.sh: one device call timing swap-AB's head-split caps side by side (quick bench, no JIT, no
# cold, no steps): the defaults, then each "NAME ARGS..." of SPLIT_CONFIGS (';'-separated), into $OUT/bench-NAME.json.
# Usage (repository root): SPLIT_HEADS=32 SPLIT_TOKENS=2,3,4 SPLIT_CONFIGS="two --split4-max-tokens 0" \
#   OUT=... scripts/device_split_caps.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
echo "kernels_src sha256: $(cat kernels_src/*.cuh | sha256sum | cut -c1-16)"
B=build-dev
export SWAPJIT_CACHE_DIR=$PWD/$B/swapjit-cache
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { echo configure failed; exit 1; }
cmake --build $B -j16 --target swapjit_cli > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
rc=0
IFS=';' read -ra configs <<< "default;${SPLIT_CONFIGS:-}"
for cfg in "${configs[@]}"; do
  [ -z "$cfg" ] && continue
  read -ra args <<< "$cfg"
  name=${args[0]}
  timeout 200 $B/bin/swapjit bench --no-jit --no-cold --no-step --heads ${SPLIT_HEADS:-16,32} \
    --tokens ${SPLIT_TOKENS:-1,2,4,8} "${args[@]:1}" --json "$OUT/bench-$name.json" > "$OUT/bench-$name.log" 2>&1 || rc=1
  grep -E '^(comp|swa) ' "$OUT/bench-$name.log" | sed "s/^/$name: /"
done
echo "rc=$rc"
exit $rc
