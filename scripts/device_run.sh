#!/usr/bin/env bash
# device_run.sh: everything the H200 machine runs, in one call from the repository root:
#   scripts/device_run.sh [check|bench|all|python|quickcheck]      (default: check)
#   check: build, CPU tests, `swapjit info`, GPU tests, `swapjit check`, compute-sanitizer memcheck and
#          racecheck on a small check; bench: build, `swapjit info`, `swapjit bench` twice and
#          `swapjit bench --compare` of the two; all: both. python (also run after check): the torch
#          CUDA-graph test and tools/tp_decode.py over 2 GPUs when there are two (NCCL), else 2 ranks on one.
#          quickcheck: build the CLI and run `swapjit check` on the default case list only (a short re-check).
#          compare: build the CLI and run only the quick bench (the baseline the variants are diffed against).
# SWAPJIT_ALT_TREES="name=dir ...": after the mode's steps, each dir (a full source tree, e.g. a
#   `git archive` export of a branch under alt/) gets its own CLI build, `swapjit check` on the default
#   cases and `swapjit bench --quick --no-jit`, then scripts/bench_diff.py against this tree's quick bench:
#   kernel variants measured side by side in one call ($OUT/bench-<name>.json, $OUT/check-<name>.json);
#   SWAPJIT_ALT_SANITIZE=1 adds each variant's racecheck on `check --only c0,c1,sw3`.
#   SWAPJIT_ALT_CHECK=0 skips the variants' check (timing probes whose outputs are wrong by design).
#   SWAPJIT_COMPARE_BENCH_ARGS="--pdl-producer" (compare mode only) adds options to every quick bench.
# Logs go to $OUT/run.log (everything, tee'd), JSON to $OUT/check-h200.json, $OUT/bench-h200.json and
# $OUT/bench-h200-2.json.
# Every step runs under `timeout`, its rc is recorded, a failure does not stop the later steps, and the
# script exits non-zero if any step failed. The whole run is held to a 9-minute budget (SWAPJIT_BUDGET_S):
# each step's timeout is capped by what is left, and a step with no time left is recorded as skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
case "$mode" in check | bench | all | python | quickcheck | compare) ;; *) echo "usage: $0 [check|bench|all|python|quickcheck|compare]" >&2; exit 2 ;; esac
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
set -x

BUDGET=${SWAPJIT_BUDGET_S:-540}
# SWAPJIT_COMPARE_BENCH_ARGS: more `swapjit bench` options for compare mode's benches (this tree's and the
# variants'), e.g. "--pdl-producer"; refused in the other modes, whose bench is the published one.
read -r -a CMP_ARGS <<<"${SWAPJIT_COMPARE_BENCH_ARGS:-}"
if ((${#CMP_ARGS[@]})) && [ "$mode" != compare ]; then
  echo "device_run.sh: SWAPJIT_COMPARE_BENCH_ARGS is for compare mode only" >&2
  exit 2
fi
JOBS=${SWAPJIT_BUILD_JOBS:-16}
BUILD=build-dev
CLI=$BUILD/bin/swapjit
export PATH=/usr/local/cuda/bin:$PATH
# The cubin cache lives in the build dir, which the device machine keeps between calls: a second run
# loads the keys instead of compiling them again.
export SWAPJIT_CACHE_DIR=$PWD/$BUILD/swapjit-cache
fail=0
results=()

# step NAME LIMIT_S CMD...: runs CMD under timeout, capped by the budget left; records NAME=rc.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - SECONDS))
  if ((left < 20)); then
    echo "=== $name: SKIPPED (budget of ${BUDGET}s spent) ==="
    results+=("$name=skipped")
    fail=1
    return
  fi
  ((limit > left - 10)) && limit=$((left - 10))
  echo "=== $name: start at ${SECONDS}s, timeout ${limit}s ==="
  timeout -k 10 "$limit" "$@"
  local rc=$?
  ((rc == 124)) && echo "=== $name: TIMED OUT after ${limit}s ==="
  echo "=== $name: rc=$rc at ${SECONDS}s ==="
  results+=("$name=$rc")
  ((rc != 0)) && fail=1
  return 0
}

{ git rev-parse HEAD 2>/dev/null || echo "no git metadata in this copy"; } | sed 's/^/commit: /'
# The device copy's git metadata can lag the working tree it runs (session 20: every log said the session's first
# commit): this hash of the kernel sources names the kernels that ran (compare with the same line run here).
echo "kernels_src sha256: $(cat kernels_src/*.cuh | sha256sum | cut -c1-16)"
date -u
nvidia-smi || echo "nvidia-smi failed"
nvcc --version | tail -2
cmake --version | head -1

step configure 90 cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release
# Variant trees are configured and built in the background from the start (their logs are printed when
# their turn comes), so that their builds overlap this tree's steps instead of adding to the budget.
declare -A alt_build_pid
for alt in ${SWAPJIT_ALT_TREES:-}; do
  name=${alt%%=*} dir=${alt#*=}
  ( cmake -S "$dir" -B "$dir/build-dev" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$dir/build-dev" -j4 --target swapjit_cli ) >"$dir/build.log" 2>&1 &
  alt_build_pid[$name]=$!
done
# Targets one by one, so that a broken test file does not keep the CLI from being built.
step build-cli 240 cmake --build $BUILD -j"$JOBS" --target swapjit_cli
if [ "$mode" = python ]; then
  step build-lib 240 cmake --build $BUILD -j"$JOBS" --target swapjit
fi
if [ "$mode" = check ] || [ "$mode" = all ]; then
  [ -z "${SWAPJIT_SKIP_CPU_TESTS:-}" ] && step build-cpu-tests 150 cmake --build $BUILD -j"$JOBS" --target swapjit_tests
  step build-gpu-tests 120 cmake --build $BUILD -j"$JOBS" --target swapjit_gpu_tests
fi
step info 30 $CLI info

if [ "$mode" = check ] || [ "$mode" = all ]; then
  # SWAPJIT_SKIP_CPU_TESTS=1 leaves them to CI (they need no GPU) when device time is short.
  if [ -z "${SWAPJIT_SKIP_CPU_TESTS:-}" ]; then step cpu-tests 150 $BUILD/bin/swapjit_tests; fi
  # check first: its warmup compiles every key in parallel into the cache the GPU tests then load.
  step check 300 $CLI check --cases 80 --json "$OUT/check-h200.json"
  step gpu-tests 120 $BUILD/bin/swapjit_gpu_tests --durations yes
  # Small cases of both decode kernels and kv_insert under the sanitizers (keys are cached by now): c0 and
  # c1 (T = 1, 2: swap-AB's wide shape), sw3 (T = 8: its mid shape).
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  step memcheck 150 "$SAN" --tool memcheck --error-exitcode 3 $CLI check --only c0,c1,sw3
  step racecheck 150 "$SAN" --tool racecheck --error-exitcode 3 $CLI check --only c0,c1,sw3
fi
if [ "$mode" = compare ]; then
  step bench-2 150 $CLI bench --quick --no-jit ${CMP_ARGS[@]+"${CMP_ARGS[@]}"} --json "$OUT/bench-h200-2.json"
fi
if [ "$mode" = quickcheck ]; then
  step check 200 $CLI check --json "$OUT/check-h200.json"
fi
if [ "$mode" = check ] || [ "$mode" = python ]; then
  # Python: torch CUDA graph with a swapjit step, then tensor-parallel decode sharing one cold cache.
  # NVLink multicast stays off (shared hosts: KINDS.md).
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
  export SWAPJIT_LIBRARY=$PWD/$BUILD/lib/libswapjit.so PYTHONPATH=$PWD/python
  step torch-graph 150 python3 python/tests/test_torch_graph_gpu.py
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  same=(--same-gpu)
  ((ngpu >= 2)) && same=()
  tp=tp$( ((ngpu >= 2)) && echo 2gpu || echo 1gpu)
  rm -rf /tmp/swapjit-tp-a /tmp/swapjit-tp-b
  step "$tp" 150 torchrun --nproc-per-node 2 tools/tp_decode.py ${same[@]+"${same[@]}"} \
    --cache-dir /tmp/swapjit-tp-a --json "$OUT/$tp-h200.json"
  step "$tp-tp4layers" 150 torchrun --nproc-per-node 2 tools/tp_decode.py ${same[@]+"${same[@]}"} --tp4-layers \
    --cache-dir /tmp/swapjit-tp-b --json "$OUT/$tp-tp4layers-h200.json"
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  # The bench twice, then the two runs' swapab/headpad ratios compared row by row (agree within 10%;
  # docs/bench.md). Run 1: JIT numbers + kernel tables, the full token list when the budget left allows
  # it (a full run took 32 s in session 6, a --quick one 8 s; 120 s left is the margin), else --quick.
  # Run 2: --quick, no JIT (its token counts 1,4,16,64 are a subset of run 1's, so every run-2 row has a
  # run-1 partner).
  first=()
  (((BUDGET - SECONDS) < 120)) && first=(--quick)
  step bench 240 $CLI bench ${first[@]+"${first[@]}"} --json "$OUT/bench-h200.json"
  step bench-2 150 $CLI bench --quick --no-jit --json "$OUT/bench-h200-2.json"
  if [ -s "$OUT/bench-h200.json" ] && [ -s "$OUT/bench-h200-2.json" ]; then
    step bench-compare 30 $CLI bench --compare "$OUT/bench-h200.json" "$OUT/bench-h200-2.json"
  else
    echo "=== bench-compare: SKIPPED (a bench JSON is missing) ==="
    results+=("bench-compare=skipped")
    fail=1
  fi
fi

# Variants: built and measured after this tree's bench, so their numbers sit beside it in one run.
for alt in ${SWAPJIT_ALT_TREES:-}; do
  name=${alt%%=*} dir=${alt#*=}
  abuild=$dir/build-dev
  step "$name-build-wait" 240 bash -c "while kill -0 ${alt_build_pid[$name]} 2>/dev/null; do sleep 1; done"
  cat "$dir/build.log" | tail -5
  step "$name-build-cli" 240 cmake --build "$abuild" -j"$JOBS" --target swapjit_cli
  # SWAPJIT_ALT_CHECK=0: no check of the variants (timing probes whose outputs are wrong by design).
  if [ "${SWAPJIT_ALT_CHECK:-1}" = 1 ]; then
    step "$name-check" 200 env SWAPJIT_CACHE_DIR="$PWD/$abuild/swapjit-cache" "$abuild/bin/swapjit" check --json "$OUT/check-$name.json"
  fi
  step "$name-bench" 120 env SWAPJIT_CACHE_DIR="$PWD/$abuild/swapjit-cache" "$abuild/bin/swapjit" bench --quick --no-jit ${CMP_ARGS[@]+"${CMP_ARGS[@]}"} --json "$OUT/bench-$name.json"
  # SWAPJIT_ALT_SANITIZE=1: the variant's racecheck too (a kernel change that adds async copies into smem, or
  # moves a barrier, is not done until it ran under the sanitizer), on the cases the main tree's steps use.
  if [ "${SWAPJIT_ALT_SANITIZE:-0}" = 1 ]; then
    step "$name-racecheck" 150 env SWAPJIT_CACHE_DIR="$PWD/$abuild/swapjit-cache" "${SAN:-compute-sanitizer}" \
      --tool racecheck --error-exitcode 3 "$abuild/bin/swapjit" check --only c0,c1,sw3
  fi
  if [ -s "$OUT/bench-h200-2.json" ] && [ -s "$OUT/bench-$name.json" ]; then
    python3 scripts/bench_diff.py "$OUT/bench-h200-2.json" "$OUT/bench-$name.json" || true
  fi
done

set +x
echo "=== summary (${SECONDS}s) ==="
for r in "${results[@]}"; do echo "  $r"; done
if ((fail)); then
  echo "device_run: FAILED"
  exit 1
fi
echo "device_run: all steps passed"
