#!/usr/bin/env python3
"""ncu_phases.py: wall-time split of a kernel into the phases between its barriers, from the per-SASS CSV
of scripts/device_profile.sh. Every instruction is counted once (the CSV repeats inlined instructions
under each source file). With all warps of a CTA meeting at each barrier, the samples of the code between
two barriers (the wait at the closing barrier included) over all samples is that phase's share of the
CTA's time.  usage: scripts/ncu_phases.py FILE.csv [DURATION_US]"""
import csv
import sys


def main(path, duration_us=None):
    seen = {}
    hdr = None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] in ("File Path", "Function Name"):
                if row[0] == "File Path":
                    hdr = None
                continue
            if row[0] == "Line No":
                hdr = row
                continue
            if hdr is None or len(row) != len(hdr):
                continue
            rec = dict(zip(hdr, row))
            addr = row[2].strip()
            if not addr.startswith("0x"):
                continue
            try:
                n = int(rec.get("Warp Stall Sampling (All Samples)", "0") or 0)
            except ValueError:
                n = 0
            line = rec["Line No"].strip()
            old = seen.get(addr)
            if old is None or (not old[2] and line):
                seen[addr] = (n, row[3].strip(), line)
    items = sorted(seen.items(), key=lambda kv: int(kv[0], 16))
    total = sum(v[0] for _, v in items) or 1
    phase, acc, first_line = 0, 0, None
    print(f"{total} samples; phase = code up to and including a barrier (BAR.SYNC / cluster barrier wait)")
    for addr, (n, sass, line) in items:
        acc += n
        if first_line is None and line:
            first_line = line
        if "BAR.SYNC" in sass or "UCGABAR_WAIT" in sass or sass.startswith("EXIT"):
            us = f" ~{duration_us * acc / total:5.2f} us" if duration_us else ""
            print(f"phase {phase:2d} ends {addr[-5:]} {sass[:28]:28s} (from line {first_line}): {100 * acc / total:5.1f}%{us}")
            phase, acc, first_line = phase + 1, 0, None
    if acc:
        print(f"tail: {100 * acc / total:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)
