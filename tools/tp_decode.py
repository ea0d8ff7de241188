#!/usr/bin/env python3
"""Tensor-parallel decode check (issue "Two GPUs"): each rank runs swapjit for its slice of V4.1-Flash's 64
heads, all ranks warm ONE shared, initially empty cache directory together, the bf16 outputs are
all-gathered and rank 0 checks all 64 heads against python/swapjit/reference.py.

    torchrun --nproc-per-node 2 tools/tp_decode.py --json /tmp/tp2.json              # two GPUs, 32 heads each
    torchrun --nproc-per-node 2 tools/tp_decode.py --tp4-layers                      # two 16-head layers a GPU
    torchrun --nproc-per-node 2 tools/tp_decode.py --same-gpu                        # two ranks on GPU 0 (gloo)
    torchrun --nproc-per-node 1 tools/tp_decode.py                                   # one rank, 64 heads
    python3 tools/tp_decode.py                                                       # the same, no torchrun

Per rank it reports the warmup wall time on the cold cache and again in a fresh Service (warm), and how
many keys it compiled versus found (cache manifests carry created_by_pid). Rank 0 checks every key was
compiled exactly once across ranks (entries == distinct keys) and no tmp/quarantine dirs remain.
Exit status 0 only if every check passed. The pure-CPU parts (arguments, head slices, the cache count)
import without torch (python/tests/test_tp_decode_cpu.py).
"""
import os

# NVLink multicast (NVLS) stays off on the lent machines; must be set before NCCL initialises.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import argparse  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOTAL_HEADS = 64  # V4.1-Flash (SPEC §1)
KV_PAIRINGS = {  # --kv: (SWA format, compressed format), the pairings of SPEC §2.2
    "v41_fp8": ("v41_fp8", "v41_fp8"),
    "v41_fp4": ("v41_fp8", "v41_fp4"),
    "v4_fp8": ("v4_fp8", "v4_fp8"),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kv", choices=sorted(KV_PAIRINGS), default="v41_fp8", help="record pairing (SPEC §2.2)")
    p.add_argument("--tp4-layers", action="store_true", help="each rank runs 16-head layers (two on 2 GPUs)")
    p.add_argument("--same-gpu", action="store_true", help="every rank on GPU 0; gathers through gloo")
    p.add_argument("--tokens", default="1,4,16", help="decode step sizes T, comma separated")
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--topk", type=int, default=512)
    p.add_argument("--swa-page", type=int, default=64)
    p.add_argument("--comp-page", type=int, default=64, help="64 (ratio-2 layers) or 128 (ratio 1)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--jobs", type=int, default=0, help="compile threads a rank (0 = default)")
    p.add_argument("--cache-dir", default=None,
                   help="the shared cache root; must be empty or absent (default: a new temp dir)")
    p.add_argument("--json", default=None, help="write the summary (rank 0) here")
    a = p.parse_args(argv)
    try:
        a.token_counts = [int(t) for t in a.tokens.split(",") if t.strip()]
    except ValueError:
        p.error(f"--tokens: not a comma list of integers: {a.tokens!r}")
    if not a.token_counts or min(a.token_counts) < 1:
        p.error("--tokens: every T must be >= 1")
    return a


def head_slices(world_size, rank, tp4_layers=False, total_heads=TOTAL_HEADS):
    """The (first head, head count) of each layer this rank runs. Plain TP: one layer of
    total/world heads (heads r*H .. r*H+H-1). --tp4-layers: layers of 16 heads, total/16 of them spread
    evenly, consecutive on a rank (2 GPUs: rank r runs heads r*32..r*32+15 and r*32+16..r*32+31)."""
    if world_size < 1 or total_heads % world_size:
        raise ValueError(f"world size {world_size} does not divide {total_heads} heads")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} not in 0..{world_size - 1}")
    per_rank = total_heads // world_size
    layer_heads = 16 if tp4_layers else per_rank
    if per_rank % layer_heads or layer_heads not in (8, 16, 32, 64, 128):
        raise ValueError(f"{per_rank} heads a rank cannot be split into layers of {layer_heads} heads")
    first = rank * per_rank
    return [(first + i * layer_heads, layer_heads) for i in range(per_rank // layer_heads)]


def canonical(key):
    """One string per compile key, whatever the JSON's field order."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def scan_cache(root):
    """The state of a cache root (layout of docs/jit-cache-notes.md): committed entries with their key and
    creator, and the leftovers that a clean run must not leave (tmp build dirs, quarantined entries)."""
    v1 = Path(root, "v1")
    entries, problems = [], []
    if v1.is_dir():
        for arch in sorted(v1.iterdir()):
            if arch.name in ("tmp", "locks", "quarantine") or not arch.is_dir():
                continue
            for fam in sorted(p for p in arch.iterdir() if p.is_dir()):
                for d in sorted(p for p in fam.iterdir() if p.is_dir()):
                    if not (d / "COMMITTED").exists():
                        problems.append(f"uncommitted entry {d}")
                        continue
                    try:
                        m = json.loads((d / "manifest.json").read_text())
                    except (OSError, ValueError) as e:
                        problems.append(f"bad manifest in {d}: {e}")
                        continue
                    entries.append(dict(dir=str(d), digest=d.name, family=fam.name, arch=arch.name,
                                        key=canonical(m.get("key")), pid=m.get("created_by_pid"),
                                        host=m.get("created_on_host"), compile_ms=m.get("compile_ms")))
    leftovers = lambda sub: sorted(str(p) for p in (v1 / sub).iterdir()) if (v1 / sub).is_dir() else []  # noqa: E731
    return dict(entries=entries, tmp=leftovers("tmp"), quarantine=leftovers("quarantine"), problems=problems)


def compiled_by(scan, pid, host):
    """The entries a given process created."""
    return [e for e in scan["entries"] if e["pid"] == pid and (host is None or e["host"] == host)]


def check_cache(scan, distinct_keys):
    """Rank 0's check: every key compiled exactly once across ranks, nothing left behind. Returns a list of
    problems (empty = pass)."""
    problems = list(scan["problems"])
    keys = [e["key"] for e in scan["entries"]]
    want = set(distinct_keys)
    if len(keys) != len(want):
        problems.append(f"{len(keys)} cache entries for {len(want)} distinct keys")
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        problems.append(f"keys with more than one entry: {dup}")
    if set(keys) != want:
        problems.append(f"missing keys {sorted(want - set(keys))}, unexpected {sorted(set(keys) - want)}")
    if scan["tmp"]:
        problems.append(f"tmp dirs left: {scan['tmp']}")
    if scan["quarantine"]:
        problems.append(f"quarantine dirs left: {scan['quarantine']}")
    return problems


# ------------------------------------------------------------------------------ the GPU part (torch)

class _Group:
    """The process group, or a stand-in for one process without torchrun. Objects and barriers go through
    gloo (no device needed); tensors through the main backend (NCCL, or gloo with --same-gpu)."""

    def __init__(self, same_gpu):
        import torch.distributed as dist
        self.dist = dist
        self.on = "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.local = int(os.environ.get("LOCAL_RANK", 0))
        self.cpu = None
        if self.on:
            # Two ranks on one GPU cannot share an NCCL communicator (NCCL rejects duplicate devices).
            dist.init_process_group(backend="gloo" if same_gpu else "nccl")
            self.cpu = dist.new_group(backend="gloo") if not same_gpu else dist.group.WORLD

    def barrier(self):
        if self.on:
            self.dist.barrier(group=self.cpu)

    def gather_obj(self, obj):
        """Every rank's JSON-able obj, by rank. Through uint8 tensors on the gloo group: torch's
        *_object collectives need numpy, which a serving image may lack."""
        if not self.on:
            return [obj]
        import torch
        data = torch.tensor(list(json.dumps(obj).encode()), dtype=torch.uint8)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world)]
        self.dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64), group=self.cpu)
        n = int(max(s.item() for s in sizes))
        padded = torch.zeros(n, dtype=torch.uint8)
        padded[:data.numel()] = data
        parts = [torch.zeros(n, dtype=torch.uint8) for _ in range(self.world)]
        self.dist.all_gather(parts, padded, group=self.cpu)
        return [json.loads(bytes(p[:int(s.item())].tolist()).decode()) for p, s in zip(parts, sizes)]

    def bcast_obj(self, obj):
        return self.gather_obj(obj)[0]

    def gather_tensor(self, t, via_cpu):
        """all_gather of a bf16 tensor [..., even], bit for bit: sent as int32 pairs (gloo has neither bf16
        nor int16)."""
        import torch
        bits = t.contiguous().view(torch.int32)
        if not self.on:
            return [t]
        if via_cpu:
            bits = bits.cpu()
        parts = [torch.empty_like(bits) for _ in range(self.world)]
        self.dist.all_gather(parts, bits.contiguous())
        return [p.view(torch.bfloat16) for p in parts]

    def close(self):
        if self.on:
            self.dist.destroy_process_group()


def _prepare_cache_dir(args, g):
    """Rank 0 makes the shared root (empty); every rank learns its path. Returns (path, error)."""
    path, err = None, None
    if g.rank == 0:
        if args.cache_dir:
            root = Path(args.cache_dir)
            root.mkdir(parents=True, exist_ok=True)
            if any(root.iterdir()):
                err = f"--cache-dir {root} is not empty: the cold-cache measurement needs an empty one"
            path = str(root)
        else:
            path = tempfile.mkdtemp(prefix="swapjit-tp-")
    return g.bcast_obj((path, err))


def main(args, api=None, device=None):
    """api, device: injected by python/tests/test_tp_decode_fake.py (a CPU stand-in for swapjit); a real
    run leaves both None."""
    try:
        import torch
    except ImportError:
        print("tp_decode: needs torch (pip install torch)", flush=True)
        return 2
    sys.path.insert(0, str(REPO / "python"))
    from swapjit import reference as R
    if api is None:
        import swapjit as api
        if not torch.cuda.is_available() or not api.has_driver():
            print("tp_decode: skipped: no GPU", flush=True)
            return 0
    swapjit = api
    dev_index = 0 if args.same_gpu else int(os.environ.get("LOCAL_RANK", 0))
    if device is None:
        torch.cuda.set_device(dev_index)  # before NCCL sees the process
        device = torch.device("cuda", dev_index)
    g = _Group(args.same_gpu)
    host, pid = socket.gethostname(), os.getpid()
    cache_dir, err = _prepare_cache_dir(args, g)
    if err:
        print(f"tp_decode: {err}", flush=True)
        g.close()
        return 2
    swa_name, comp_name = KV_PAIRINGS[args.kv]
    swa_fmt, comp_fmt = R.FORMAT_NAMES[swa_name], R.FORMAT_NAMES[comp_name]
    slices = head_slices(g.world, g.rank, args.tp4_layers)

    def build():
        svc = swapjit.Service(cache_dirs=cache_dir, jobs=args.jobs, device=dev_index)
        layers = [swapjit.Layer(svc, live_heads=n, window=args.window, topk=args.topk, swa_format=swa_fmt,
                                comp_format=comp_fmt, swa_page=args.swa_page, comp_page=args.comp_page,
                                q_layout=swapjit.Q_PLAIN, out_layout=swapjit.OUT_BF16) for _, n in slices]
        return svc, layers

    # Cold: every rank warms the empty cache at once (the barrier lines them up).
    svc, layers = build()
    my_keys = sorted({canonical(k) for layer in layers for k in layer.keys()})
    g.barrier()
    t0 = time.perf_counter()
    svc.warmup()
    cold_s = time.perf_counter() - t0
    g.barrier()  # every rank's compiles are published before anyone counts
    cold_compiled = len(compiled_by(scan_cache(cache_dir), pid, host))
    svc.close()
    # Warm: a fresh Service over the now full cache must find every key.
    svc, layers = build()
    t0 = time.perf_counter()
    svc.warmup()
    warm_s = time.perf_counter() - t0
    scan = scan_cache(cache_dir)
    warm_compiled = len(compiled_by(scan, pid, host)) - cold_compiled
    me = dict(rank=g.rank, device=dev_index, pid=pid, heads=slices, keys=len(my_keys),
              cold_warmup_s=round(cold_s, 3), cold_compiled=cold_compiled, cold_found=len(my_keys) - cold_compiled,
              warm_warmup_s=round(warm_s, 3), warm_compiled=warm_compiled, my_keys=my_keys)
    print(f"tp_decode rank {g.rank} (GPU {dev_index}, heads {slices}): {len(my_keys)} keys; cold warmup "
          f"{cold_s:.2f} s compiled {cold_compiled} found {len(my_keys) - cold_compiled}; warm warmup "
          f"{warm_s:.3f} s compiled {warm_compiled}", flush=True)
    ranks = g.gather_obj(me)
    g.barrier()
    scan = scan_cache(cache_dir)  # after every rank's warm pass

    steps, ok = [], True
    for T in args.token_counts:
        case = R.random_case(T, TOTAL_HEADS, swa_fmt, comp_fmt, window=args.window, topk=args.topk,
                             swa_page=args.swa_page, comp_page=args.comp_page, seed=args.seed + T)
        dev = R.case_to(case, device)
        auto, hp, same = [], [], True
        for (h0, n), layer in zip(slices, layers):
            q = dev["q"][:, h0:h0 + n].contiguous()
            sink = dev["sink"][h0:h0 + n].contiguous()
            outs = []
            for choice in (swapjit.CHOICE_AUTO, swapjit.CHOICE_AUTO, swapjit.CHOICE_HEADPAD):
                out = torch.full((T, n, 512), float("nan"), dtype=torch.bfloat16, device=device)  # poison
                layer.forward(**R.forward_kwargs(dev, q, out, sink), choice=choice)
                outs.append(out)
            if device.type == "cuda":
                torch.cuda.synchronize()
            same = same and torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
            auto.append(outs[0])
            hp.append(outs[2])
        local = torch.cat([torch.cat(auto, dim=1), torch.cat(hp, dim=1)], dim=1)  # [T, 2 * heads, 512]
        parts = g.gather_tensor(local, via_cpu=args.same_gpu)
        sames = g.gather_obj(bool(same))
        if g.rank == 0:
            per = local.shape[1] // 2
            full = torch.cat([p[:, :per].cpu() for p in parts], dim=1)
            full_hp = torch.cat([p[:, per:].cpu() for p in parts], dim=1)
            ref = R.reference_of_case(case)
            err = R.rel_l2_per_head(full, ref)
            err_hp = R.rel_l2_per_head(full_hp, ref)
            amax = float((full.double() - ref).abs().max())
            amax_hp = float((full_hp.double() - ref).abs().max())
            choice = layers[0].choose(T, args.window)
            step_ok = bool((err <= 5e-3).all()) and bool((err_hp <= 5e-3).all()) and all(sames)
            if choice == swapjit.CHOICE_SWAPAB:  # SPEC §4: swap-AB max-abs at most 1.1x the head-padded one
                step_ok = step_ok and amax <= 1.1 * amax_hp
            ok = ok and step_ok
            steps.append(dict(tokens=T, choice="swapab" if choice == swapjit.CHOICE_SWAPAB else "headpad",
                              max_rel_l2=float(err.max()), max_rel_l2_headpad=float(err_hp.max()),
                              max_abs=amax, max_abs_headpad=amax_hp, deterministic=all(sames), ok=step_ok))
            print(f"tp_decode T={T}: {steps[-1]}", flush=True)

    result = 0
    if g.rank == 0:
        distinct = sorted({k for r in ranks for k in r["my_keys"]})
        problems = check_cache(scan, distinct)
        for r in ranks:
            if r["warm_compiled"]:
                problems.append(f"rank {r['rank']} compiled {r['warm_compiled']} key(s) on the warm pass")
        compiled_total = sum(r["cold_compiled"] for r in ranks)
        if compiled_total != len(distinct):
            problems.append(f"{compiled_total} compiles across ranks for {len(distinct)} distinct keys")
        ok = ok and not problems
        summary = dict(ok=ok, world_size=g.world, same_gpu=args.same_gpu, tp4_layers=args.tp4_layers,
                       kv=args.kv, swa_format=swa_name, comp_format=comp_name, window=args.window,
                       topk=args.topk, swa_page=args.swa_page, comp_page=args.comp_page, cache_dir=cache_dir,
                       arch=svc.arch, distinct_keys=len(distinct), cache_entries=len(scan["entries"]),
                       cache_problems=problems, steps=steps,
                       ranks=[{k: v for k, v in r.items() if k != "my_keys"} for r in ranks])
        print(f"tp_decode: {'PASS' if ok else 'FAIL'}; cache {len(scan['entries'])} entries for "
              f"{len(distinct)} keys; problems: {problems or 'none'}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
        result = 0 if ok else 1
    svc.close()
    result = g.bcast_obj(result)
    g.close()
    return result


if __name__ == "__main__":
    sys.exit(main(parse_args()))
