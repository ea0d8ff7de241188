#!/usr/bin/env python3
"""ncu_hotspots.py: summarises the per-instruction CSV of scripts/device_profile.sh
(`ncu --page source --csv --print-source sass,cuda`): warp-stall samples by reason over the whole kernel,
then the source lines (file:line) with the most samples and their main stall reasons.
usage: scripts/ncu_hotspots.py FILE.csv [TOP]"""
import csv
import collections
import sys


def main(path, top=25):
    by_line = collections.Counter()
    reasons_by_line = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    text = {}
    file_path, header = None, None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "File Path":
                file_path, header = row[1].rsplit("/", 1)[-1], None
                continue
            if row[0] == "Line No":
                header = row
                continue
            if header is None or len(row) != len(header):
                continue
            rec = dict(zip(header, row))
            try:
                n = int(rec.get("Warp Stall Sampling (All Samples)", "0") or 0)
            except ValueError:
                continue
            if n == 0:
                continue
            key = f"{file_path}:{rec['Line No']}"
            by_line[key] += n
            text[key] = row[1].strip()[:90]
            for h in header:
                if h.startswith("stall_") and "(Not Issued)" not in h:
                    try:
                        v = int(rec[h] or 0)
                    except ValueError:
                        continue
                    reasons[h] += v
                    reasons_by_line[key][h] += v
    total = sum(by_line.values()) or 1
    print(f"{total} samples")
    for r, v in reasons.most_common(12):
        print(f"  {r:24s} {v:7d} {100 * v / total:5.1f}%")
    print()
    for key, v in by_line.most_common(top):
        rs = ", ".join(f"{r[6:]} {c}" for r, c in reasons_by_line[key].most_common(3))
        print(f"{100 * v / total:5.1f}% {key:28s} {text[key]:90s} [{rs}]")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25)
