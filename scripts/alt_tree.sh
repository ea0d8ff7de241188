#!/usr/bin/env bash
# alt_tree.sh NAME [PATCH | REV]: makes alt/NAME, a source tree for device_run.sh's SWAPJIT_ALT_TREES (a kernel
# variant measured beside this tree in the same device call): HEAD's files with PATCH applied (a file, e.g. one of
# docs/experiments/*.patch), or REV's files (a branch or commit), or HEAD's alone. docs/ is left out: its results
# would push the call's copy past its 64 MiB limit. Then:
#   SWAPJIT_SKIP_CPU_TESTS=1 SWAPJIT_ALT_SANITIZE=1 SWAPJIT_ALT_TREES="NAME=alt/NAME" scripts/device_run.sh compare
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/alt_tree.sh NAME [PATCH | REV]}
src=${2:-}
dir=alt/$name
rm -rf "$dir"
mkdir -p "$dir"
if [ -n "$src" ] && [ -f "$src" ]; then
  git archive HEAD | tar -x -C "$dir"
  git apply --directory="$dir" "$src"
else
  rev=${src:-HEAD}
  git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "alt_tree.sh: $rev is neither a patch file nor a revision" >&2; rm -rf "$dir"; exit 2; }
  git archive "$rev" | tar -x -C "$dir"
fi
rm -rf "$dir/docs"
echo "$dir: $(find "$dir" -type f | wc -l) files, $(du -sh "$dir" | cut -f1)"
