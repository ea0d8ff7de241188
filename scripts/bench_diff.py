#!/usr/bin/env python3
"""bench_diff.py: per-call times of two `swapjit bench --json` files, row by row.

    scripts/bench_diff.py BASE.json VARIANT.json [--cache warm|cold|all]

For kernel variants measured in one device call (scripts/device_run.sh with SWAPJIT_ALT_TREES): prints,
for every row both files hold, the swap-AB and head-padded microseconds of each file and variant / base,
then the median of those ratios per kernel, layer and head count. Floors (the empty kernel) are printed
beside, since a drift in them says the machine, not the kernel, moved. Exit status 0 unless a file
cannot be read.
"""
import argparse
import json
import statistics
import sys


def rows(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc["results"]:
        key = (r["layer"], r["kv"], r["heads"], r["tokens"], r["cache"])
        out[key] = r
    return out


def fmt(x):
    return "      -" if x is None else f"{x:7.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("variant")
    ap.add_argument("--cache", default="warm", choices=["warm", "cold", "all"])
    args = ap.parse_args(argv)
    try:
        a, b = rows(args.base), rows(args.variant)
    except (OSError, KeyError, json.JSONDecodeError) as e:
        print(f"bench_diff: cannot read the bench files: {e}", file=sys.stderr)
        return 2
    print(f"bench_diff: base {args.base}  variant {args.variant}  (variant / base < 1: variant faster)")
    print(f"{'layer':10} {'kv':18} {'h':>3} {'T':>3} {'l2':4} | {'sw base':>7} {'sw var':>7} {'ratio':>6} |"
          f" {'hp base':>7} {'hp var':>7} {'ratio':>6} | {'empty a':>7} {'empty b':>7}")
    groups = {}
    for key in sorted(a):
        if key not in b or (args.cache != "all" and key[4] != args.cache):
            continue
        ra, rb = a[key], b[key]
        cells = []
        for kernel in ("swapab_us", "headpad_us"):
            x, y = ra.get(kernel), rb.get(kernel)
            ratio = y / x if x and y else None
            if ratio is not None:
                groups.setdefault((kernel[:-3], key[0], key[2]), []).append(ratio)
            cells.append(f"{fmt(x)} {fmt(y)} {('  -   ' if ratio is None else f'{ratio:6.3f}')}")
        print(f"{key[0]:10} {key[1]:18} {key[2]:3} {key[3]:3} {key[4]:4} | {cells[0]} | {cells[1]} |"
              f" {fmt(ra.get('empty_floor_us'))} {fmt(rb.get('empty_floor_us'))}")
    print("median variant / base per kernel, layer, heads:")
    for (kernel, layer, heads), rs in sorted(groups.items()):
        print(f"  {kernel:8} {layer:10} h{heads:<3} {statistics.median(rs):6.3f}  ({len(rs)} rows,"
              f" {min(rs):.3f}..{max(rs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
