#!/usr/bin/env python3
"""best_head_groups.py: from `swapjit bench` JSONs of one head-split sweep (scripts/device_split_caps.sh with configs
named base / split4 / split2: one, four and two clusters a token), print for every (heads, layer, pairing) the
fastest clusters at each T with its time over the unsplit one. The head-padded kernel's rows by default.
Usage: scripts/best_head_groups.py DIR [DIR ...] [--kernel swapab]  (the bench-*.json of each DIR are merged)."""
import argparse
import json


def load(dirs, name, kernel):
    t = {}
    for d in dirs:
        with open(f"{d}/bench-{name}.json") as f:
            for r in json.load(f)["rows"]:
                if r["measure"] == "call" and r["l2"] == "warm" and r["kernel"] == kernel:
                    t[(r["heads"], r["layer"][:4], r["swa_format"], r["tokens"])] = r["us_per_call"]
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--kernel", default="headpad")
    a = ap.parse_args()
    base, s4, s2 = (load(a.dirs, n, a.kernel) for n in ("base", "split4", "split2"))
    for case in sorted({k[:3] for k in base}):
        cells = []
        for t in sorted(k[3] for k in base if k[:3] == case):
            k = case + (t,)
            us, groups = min((base[k], 1), (s4[k], 4), (s2[k], 2))
            cells.append(f"{t}:{groups}({us / base[k]:.2f})")
        print(case, " ".join(cells))


if __name__ == "__main__":
    main()
