#!/usr/bin/env python3
"""wide_split_estimate.py: what swap-AB head splits would give layers of 64 and 128 heads, from one bench.

    scripts/wide_split_estimate.py BENCH.json [--cache warm|cold]

BENCH.json is a `swapjit bench --json` run with the swap-AB head splits off
(`--split-max-tokens 0 --split4-max-tokens 0`) and head-padded rows at 64 and 128 heads
(`--heads 16,32,64,128`). Every cluster of a split step does what one token's cluster of the key's own
layer does (DecodeParams.head_groups: Q, sink and output index the layer's heads; the work per cluster is the
key's), so a layer of H heads split over G clusters of the H / G-head key, at T tokens, launches the same
grid as an unsplit step of the H / G-head layer at G * T tokens. This prints, for each such pairing the bench
holds, that unsplit swap-AB time beside the head-padded kernel's H-head time at T, and their ratio (< 1: the
split swap-AB step would be faster). An estimate, not a measurement of a split step: the Q writer before each
call writes the same bytes either way, and the output groups are the same, but no 64-head swap-AB step ran.
Exit status 0 unless the file cannot be read or its swap-AB rows ran split.
"""
import argparse
import json
import sys

# (layer heads, clusters a token, key heads)
SPLITS = [(64, 4, 16), (64, 2, 32), (128, 4, 32)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--cache", default="warm", choices=["warm", "cold"])
    args = ap.parse_args(argv)
    try:
        with open(args.bench) as f:
            doc = json.load(f)
        results = doc["results"]
    except (OSError, KeyError, json.JSONDecodeError) as e:
        print(f"wide_split_estimate.py: {args.bench}: {e}", file=sys.stderr)
        return 1
    # The mapping holds only for unsplit swap-AB rows: a split row at G * T is a smaller key on more clusters.
    caps = {name: doc.get(name, {}) for name in
            ("swapab_split_max_tokens", "swapab_split4_max_tokens", "swapab_split_also_at")}
    on = [f"{name} {k}: {v}" for name, d in caps.items() for k, v in d.items() if v]
    if on:
        print(f"wide_split_estimate.py: {args.bench} ran swap-AB with head splits ({'; '.join(on)}); "
              "run the bench with --split-max-tokens 0 --split4-max-tokens 0", file=sys.stderr)
        return 1
    swapab, headpad = {}, {}
    for r in results:
        if r.get("cache") != args.cache:
            continue
        key = (r["layer"], r["kv"], r["heads"], r["tokens"])
        if r.get("swapab_us") is not None:
            swapab[key] = r["swapab_us"]
        if r.get("headpad_us") is not None:
            headpad[key] = r["headpad_us"]
    print(f"{'layer':<11} {'kv':<17} {'heads':>5} {'T':>3} {'split':>9} {'swap-AB us':>10} {'head-pad us':>11} {'ratio':>6}")
    best = {}
    for (layer, kv, heads, tokens), hp in sorted(headpad.items()):
        for layer_heads, groups, key_heads in SPLITS:
            if heads != layer_heads:
                continue
            sa = swapab.get((layer, kv, key_heads, groups * tokens))
            if sa is None:
                continue
            ratio = sa / hp
            print(f"{layer:<11} {kv:<17} {heads:>5} {tokens:>3} {f'{groups}x{key_heads}':>9} {sa:>10.2f} {hp:>11.2f} {ratio:>6.3f}")
            k = (layer, heads, tokens, kv)
            best[k] = min(best.get(k, ratio), ratio)
    per_t = {}
    for (layer, heads, tokens, kv), ratio in best.items():
        per_t.setdefault((layer, heads, tokens), []).append(ratio)
    if per_t:
        print("\nthe best split / head-padded, min-max over the pairings:")
        for (layer, heads, tokens), ratios in sorted(per_t.items()):
            print(f"  {layer:<11} {heads:>4} heads T = {tokens:<3} {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
