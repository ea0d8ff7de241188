#!/usr/bin/env python3
"""ncu_report.py: reads the per-instruction CSV of scripts/device_profile.sh
(`ncu --page source --csv --print-source sass,cuda`) and prints one of three views:
  phases FILE.csv [DURATION_US]  wall-time split of the kernel into the phases between its barriers. With
                                 all warps of a CTA meeting at each barrier, the samples of the code between
                                 two barriers (the wait at the closing barrier included) over all samples
                                 is that phase's share of the CTA's time.
  lines FILE.csv [TOP]           warp-stall samples by reason, then the source lines (file:line) with the
                                 most samples and their main stall reasons.
  ops FILE.csv PHASE             the warp instructions one phase executed, by SASS opcode (session 30 run 4: the
                                 swap-AB gather with and without an RS S^T, where register copies made the gap).
  footprint FILE.csv [TOP]       the executed code: distinct SASS instructions with a non-zero execution
                                 count (x 16 B), their no_inst samples, and the source lines that own the most
                                 of them. Code is fetched cold at every launch (perf-notes, session 11), so
                                 this is what a launch pays for in instruction fetch.
Every SASS instruction is counted once: the CSV repeats inlined instructions under each source file."""
import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def rows(path):
    """(file, record) for every data row: source-line rows carry "Line No", SASS rows do not."""
    hdr, file_path = None, None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "File Path":
                file_path, hdr = row[1].rsplit("/", 1)[-1], None
            elif row[0] == "Line No":
                hdr = row
            elif hdr is not None and len(row) == len(hdr):
                yield file_path, hdr, row


def samples_and_reasons(hdr, rec):
    try:
        n = int(rec.get(SAMPLES, "0") or 0)
    except ValueError:
        n = 0
    reasons = {}
    for h in hdr:
        if h.startswith("stall_") and "(Not Issued)" not in h:
            try:
                reasons[h[6:]] = int(rec[h] or 0)
            except ValueError:
                pass
    return n, reasons


def instructions(path, with_executed=False):
    """{address: (samples, sass)} over the SASS rows, each address once; (samples, sass, executed) with_executed."""
    seen = {}
    for _, hdr, row in rows(path):
        rec = dict(zip(hdr, row))
        addr = row[2].strip()
        if rec["Line No"].strip() or not addr.startswith("0x") or addr in seen:
            continue
        entry = (samples_and_reasons(hdr, rec)[0], row[3].strip())
        if with_executed:
            count = rec.get("Instructions Executed", "0").strip()
            entry += (int(count) if count.isdigit() else 0,)
        seen[addr] = entry
    return seen


def ends_phase(sass):
    return "BAR.SYNC" in sass or "UCGABAR_WAIT" in sass or sass.startswith("EXIT")


def phases(path, duration_us=None):
    items = sorted(instructions(path).items(), key=lambda kv: int(kv[0], 16))
    total = sum(v[0] for _, v in items) or 1
    print(f"{total} samples; phase = code up to and including a barrier (BAR.SYNC / cluster barrier wait)")
    phase, acc = 0, 0
    for addr, (n, sass) in items:
        acc += n
        if ends_phase(sass):
            us = f" ~{duration_us * acc / total:5.2f} us" if duration_us else ""
            print(f"phase {phase:2d} ends {addr[-5:]} {sass[:28]:28s}: {100 * acc / total:5.1f}%{us}")
            phase, acc = phase + 1, 0
    if acc:
        print(f"tail: {100 * acc / total:5.1f}%")


def ops(path, wanted):
    items = sorted(instructions(path, with_executed=True).items(), key=lambda kv: int(kv[0], 16))
    phase, by_op = 0, collections.Counter()
    for _, (_, sass, executed) in items:
        if phase == wanted:
            words = sass.split()
            op = words[1] if words and words[0].startswith("@") else (words[0] if words else "")
            by_op[op] += executed
        if ends_phase(sass):
            phase += 1
    print(f"phase {wanted}: {sum(by_op.values())} warp instructions executed")
    for op, n in by_op.most_common(30):
        print(f"  {op:28s} {n:9d}")


def lines(path, top=25):
    by_line, reasons_by_line, reasons = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    for file_path, hdr, row in rows(path):
        rec = dict(zip(hdr, row))
        line = rec["Line No"].strip()
        if not line:
            continue  # a SASS row: its samples are in its source line's row already
        n, rs = samples_and_reasons(hdr, rec)
        if n == 0:
            continue
        key = f"{file_path}:{line}"
        by_line[key] += n
        for r, v in rs.items():
            reasons[r] += v
            reasons_by_line[key][r] += v
    total = sum(by_line.values()) or 1
    print(f"{total} samples")
    for r, v in reasons.most_common(12):
        print(f"  {r:22s} {v:7d} {100 * v / total:5.1f}%")
    for key, v in by_line.most_common(top):
        rs = ", ".join(f"{r} {c}" for r, c in reasons_by_line[key].most_common(3))
        print(f"{100 * v / total:5.1f}% {key:28s} [{rs}]")


def footprint(path, top=25):
    executed, no_inst = set(), 0
    by_line, fetch_by_line = collections.Counter(), collections.Counter()
    line = None
    for file_path, hdr, row in rows(path):
        rec = dict(zip(hdr, row))
        if rec["Line No"].strip():
            line = f"{file_path}:{rec['Line No'].strip()}"
            continue
        addr = row[2].strip()
        count = rec.get("Instructions Executed", "0").strip()
        if not addr.startswith("0x") or count in ("", "-", "0"):
            continue
        stalls = samples_and_reasons(hdr, rec)[1].get("no_inst", 0)
        by_line[line] += 1  # inlined code counts under each of its source files' lines
        fetch_by_line[line] += stalls
        if addr not in executed:
            executed.add(addr)
            no_inst += stalls
    print(f"{len(executed)} distinct SASS instructions executed ({16 * len(executed) / 1024:.1f} KB), "
          f"{no_inst} no_inst samples on them")
    for key, v in by_line.most_common(top):
        print(f"{v:6d} instructions {fetch_by_line[key]:6d} no_inst  {key}")


if __name__ == "__main__":
    views = {"phases": lambda a: phases(a[0], float(a[1]) if len(a) > 1 else None),
             "lines": lambda a: lines(a[0], int(a[1]) if len(a) > 1 else 25),
             "ops": lambda a: ops(a[0], int(a[1]) if len(a) > 1 else 0),
             "footprint": lambda a: footprint(a[0], int(a[1]) if len(a) > 1 else 25)}
    if len(sys.argv) < 3 or sys.argv[1] not in views:
        sys.exit(__doc__)
    views[sys.argv[1]](sys.argv[2:])
