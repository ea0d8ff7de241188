"""tools/tp_decode.py's whole flow on the CPU with a stand-in for swapjit (needs torch; skips without it):
one process, and two ranks through torch.distributed (gloo, as --same-gpu runs them). The stand-in Service
writes cache entries the way the real one does (manifest with created_by_pid, COMMITTED), and its Layer
computes the output with reference.py, so the tool's slicing, gathering, checks and JSON are exercised;
planted faults (a wrong head, a key compiled twice) must make it fail."""
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[2] / "tools"))
import swapjit  # noqa: E402  (constants only: the library is not loaded)
import tp_decode as tp  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

FAULTS = {"bad_head": False, "double_compile": False}
FORMAT_TEXT = {1: "v41_fp8", 2: "v41_fp4", 3: "v4_fp8"}


class FakeApi:
    CHOICE_AUTO, CHOICE_SWAPAB, CHOICE_HEADPAD = swapjit.CHOICE_AUTO, swapjit.CHOICE_SWAPAB, swapjit.CHOICE_HEADPAD
    Q_PLAIN, OUT_BF16 = swapjit.Q_PLAIN, swapjit.OUT_BF16

    @staticmethod
    def has_driver():
        return True

    class Service:
        def __init__(self, cache_dirs, jobs=0, device=0):
            self.root, self.layers, self.arch = cache_dirs, [], "sm_90a"

        def warmup(self):
            for layer in self.layers:
                for k in layer.keys():
                    text = tp.canonical(k)
                    d = Path(self.root, "v1", self.arch, k["family"], hashlib.sha256(text.encode()).hexdigest())
                    if d.exists() and not FAULTS["double_compile"]:
                        continue
                    if d.exists():
                        d = d.with_name(d.name + "-again")
                    try:
                        d.mkdir(parents=True)  # atomic: of two ranks racing for a key, one compiles it
                    except FileExistsError:
                        continue
                    (d / "manifest.json").write_text(json.dumps(
                        {"key": k, "created_by_pid": os.getpid(), "created_on_host": socket.gethostname()}))
                    (d / "COMMITTED").write_text("1\n")

        def close(self):
            pass

    class Layer:
        def __init__(self, svc, live_heads, window, topk, swa_format, comp_format, swa_page, comp_page,
                     q_layout, out_layout):
            self.heads, self.window, self.topk = live_heads, window, topk
            self.fmt, self.page = (swa_format, comp_format), (swa_page, comp_page)
            svc.layers.append(self)

        def keys(self):
            dec = dict(arch="sm_90a", live_heads=self.heads, window=self.window, topk=self.topk,
                       swa_format=FORMAT_TEXT[self.fmt[0]], comp_format=FORMAT_TEXT[self.fmt[1]],
                       swa_page=self.page[0], comp_page=self.page[1], q_layout="plain", out_layout="bf16")
            keys = [dict(dec, family="headpad_decode")]
            if self.heads in (16, 32):
                keys.append(dict(dec, family="swapab_decode"))
            for f, p in zip(self.fmt, self.page):
                k = dict(family="kv_insert", arch="sm_90a", swa_format=FORMAT_TEXT[f], swa_page=p)
                if k not in keys:
                    keys.append(k)
            return keys

        def choose(self, tokens, width):
            ok = self.heads in (16, 32) and tokens <= 64 and width == self.window  # SPEC §5 cap as shipped
            return FakeApi.CHOICE_SWAPAB if ok else FakeApi.CHOICE_HEADPAD

        def forward(self, num_tokens, q, positions, cos_sin, swa_slots, swa_lens, swa_cache, sink, out_bf16,
                    comp_slots=None, comp_lens=None, comp_cache=None, choice=0, **_):
            from swapjit import reference as R

            def cache(ref, fmt, page):
                c = R.PagedCache(fmt, page, 1)
                c.buf, c.page_stride, c.pages = ref[0], ref[1], ref[2]
                return c
            comp = cache(comp_cache, self.fmt[1], self.page[1]) if comp_cache else None
            ref = R.reference_step(q, positions, cos_sin, swa_slots, swa_lens, cache(swa_cache, self.fmt[0],
                                   self.page[0]), comp_slots, comp_lens, comp, sink=sink)
            out_bf16.copy_(ref.to(torch.bfloat16))
            if FAULTS["bad_head"] and q.shape[1] > 1:
                out_bf16[:, 1] *= 1.02  # 2% off on one head: over SPEC §4's 5e-3


def run(argv):
    return tp.main(tp.parse_args(argv), api=FakeApi, device=torch.device("cpu"))


@unittest.skipIf(torch is None, "torch not installed")
class FakeRun(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self._tmp.name)
        FAULTS.update(bad_head=False, double_compile=False)
        self._env = {k: os.environ.pop(k) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK") if k in os.environ}

    def tearDown(self):
        os.environ.update(self._env)
        self._tmp.cleanup()

    def summary(self):
        return json.loads((self.dir / "s.json").read_text())

    def argv(self, *extra):
        return ["--tokens", "1,4", "--json", str(self.dir / "s.json"), "--cache-dir", str(self.dir / "c"), *extra]

    def test_one_rank(self):
        self.assertEqual(run(self.argv()), 0)
        s = self.summary()
        self.assertTrue(s["ok"], s)
        self.assertEqual((s["world_size"], s["distinct_keys"], s["cache_entries"]), (1, 2, 2))
        r = s["ranks"][0]
        self.assertEqual((r["heads"], r["cold_compiled"], r["cold_found"], r["warm_compiled"]), ([[0, 64]], 2, 0, 0))
        self.assertEqual([st["tokens"] for st in s["steps"]], [1, 4])
        self.assertTrue(all(st["deterministic"] and st["max_rel_l2"] < 5e-3 for st in s["steps"]))

    def test_tp4_layers_v41_fp4(self):
        self.assertEqual(run(self.argv("--tp4-layers", "--kv", "v41_fp4", "--comp-page", "128")), 0)
        s = self.summary()
        self.assertTrue(s["ok"], s)
        self.assertEqual(s["ranks"][0]["heads"], [[0, 16], [16, 16], [32, 16], [48, 16]])
        self.assertEqual(s["distinct_keys"], 4)  # headpad, swapab, two kv_insert (fp8/64, fp4/128)
        self.assertEqual([st["choice"] for st in s["steps"]], ["swapab", "swapab"])

    def test_wrong_head_fails(self):
        FAULTS["bad_head"] = True
        self.assertEqual(run(self.argv("--tp4-layers")), 1)
        self.assertFalse(self.summary()["ok"])

    def test_double_compile_fails(self):
        FAULTS["double_compile"] = True
        self.assertEqual(run(self.argv()), 1)
        s = self.summary()
        self.assertFalse(s["ok"])
        self.assertTrue(s["cache_problems"])

    def test_nonempty_cache_dir_is_refused(self):
        (self.dir / "c").mkdir()
        (self.dir / "c" / "x").write_text("")
        self.assertEqual(run(self.argv()), 2)

    def test_two_ranks_gloo(self):
        port = 29500 + os.getpid() % 2000
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), LOCAL_WORLD_SIZE="2")
            procs.append(subprocess.Popen([sys.executable, "-W", "ignore", str(HERE), "--rank-run",
                                           *self.argv("--same-gpu", "--tokens", "1,16")], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=240)[0] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], "\n".join(outs))
        s = self.summary()
        self.assertTrue(s["ok"], s)
        self.assertEqual(s["world_size"], 2)
        self.assertEqual([r["heads"] for r in s["ranks"]], [[[0, 32]], [[32, 32]]])
        # Both ranks want the same 3 keys; between them each was compiled exactly once.
        self.assertEqual(s["distinct_keys"], 3)
        self.assertEqual(sum(r["cold_compiled"] for r in s["ranks"]), 3)
        self.assertEqual([r["cold_compiled"] + r["cold_found"] for r in s["ranks"]], [3, 3])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank-run":
        sys.exit(run(sys.argv[2:]))
    unittest.main()
