#!/usr/bin/env bash
# sass_identity.sh OLD_CLI NEW_CLI: compiles every model preset's keys (v4.1-flash at TP 4 and 2, v4-flash,
# v4-pro) with two builds of `swapjit` into fresh caches and compares each key's SASS instruction stream
# (nvdisasm, addresses stripped). Exit 0 and "SASS IDENTICAL" when every key matches: then a tree whose
# kernels the H200 validated (OLD_CLI's) and a refactored one (NEW_CLI's) run the same machine code, so the
# GPU results carry over. No GPU needed. nvdisasm: $NVDISASM, else the one on the PATH (the CUDA toolkit's,
# or the `nvidia-cuda-nvdisasm` wheel's).
set -euo pipefail
old=$1 new=$2
nvdisasm=${NVDISASM:-$(command -v nvdisasm)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in "v4.1-flash 4" "v4.1-flash 2" "v4-flash 4" "v4-pro 4"; do
  set -- $p
  "$old" precompile --preset "$1" --tp "$2" --cache-dir "$work/old" --jobs 2 >/dev/null
  "$new" precompile --preset "$1" --tp "$2" --cache-dir "$work/new" --jobs 2 >/dev/null
done
# One line per key: its canonical JSON and a digest of its instruction stream.
dump() {
  find "$1" -name manifest.json | sort | while read -r m; do
    key=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['key'], sort_keys=True))" "$m")
    sass=$("$nvdisasm" -c "$(dirname "$m")/kernel.cubin" | sed -n 's/^\s*\/\*[0-9a-f]*\*\/\s*\([^;]*\);.*/\1/p' | sha256sum)
    echo "$key ${sass:0:16}"
  done | sort
}
dump "$work/old" >"$work/old.txt"
dump "$work/new" >"$work/new.txt"
echo "$(wc -l <"$work/old.txt") keys"
if diff "$work/old.txt" "$work/new.txt"; then echo "SASS IDENTICAL"; else echo "SASS DIFFERS (lines above)"; exit 1; fi
