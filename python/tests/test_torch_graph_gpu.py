"""swapjit inside a torch.cuda.CUDAGraph, next to torch ops (GPU only; skips cleanly without torch or a GPU).

    python3 python/tests/test_torch_graph_gpu.py          # from the repo root, after building libswapjit.so

For v41_fp8 and v4_fp8: a random case built with torch (python/swapjit/reference.py's writer), a 16-head
layer (plain q, bf16 output) warmed, then one graph that writes Q in place with torch ops, runs the swapjit
decode step and reads its output with a torch op; replayed 100 times. Checks: the output against the fp64
reference within SPEC §4 (per-head rel L2 <= 5e-3), bit-identical across replays and equal to an eager
launch; a new Q written into the graph's input is used by the next replay. Also: a key not warmed met inside
a capture raises SwapjitError (not_warmed) and the capture still ends.
"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import swapjit  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def _skip_reason():
    if torch is None:
        return "skipped: no torch"
    if not torch.cuda.is_available():
        return "skipped: no GPU"
    if not swapjit.has_driver():
        return "skipped: no GPU (swapjit finds no CUDA driver)"
    return None


SKIP = _skip_reason()
if SKIP:
    print(f"test_torch_graph_gpu: {SKIP}", flush=True)
else:
    from swapjit import reference as R

REPLAYS = 100


@unittest.skipIf(SKIP is not None, SKIP or "")
class TorchGraph(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="swapjit-graph-")
        cls.svc = swapjit.Service(cache_dirs=os.environ.get("SWAPJIT_CACHE_DIR") or cls._tmp.name,
                                  device=torch.cuda.current_device())
        cls.layers = {}
        for name in ("v41_fp8", "v4_fp8"):
            fmt = R.FORMAT_NAMES[name]
            cls.layers[name] = swapjit.Layer(cls.svc, live_heads=16, window=128, topk=512, swa_format=fmt,
                                             comp_format=fmt, swa_page=64, comp_page=64,
                                             q_layout=swapjit.Q_PLAIN, out_layout=swapjit.OUT_BF16)
        cls.svc.warmup()  # before any capture (DESIGN: warm before capture)

    @classmethod
    def tearDownClass(cls):
        cls.svc.close()
        cls._tmp.cleanup()

    def _graph_case(self, name, tokens, seed):
        layer = self.layers[name]
        fmt = R.FORMAT_NAMES[name]
        case = R.random_case(tokens, 16, fmt, fmt, seed=seed)
        dev = R.case_to(case, "cuda")
        q_src = dev["q"].clone()                 # the "projection output" the graph copies from
        q = torch.zeros_like(q_src)              # bf16 [T, 16, 512]: the graph writes it in place
        out = torch.full((tokens, 16, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
        post = torch.zeros(tokens, 16, 512, dtype=torch.float32, device="cuda")
        kw = R.forward_kwargs(dev, q, out, dev["sink"])

        def body():
            q.copy_(q_src)
            q.mul_(2.0).mul_(0.5)                # exact in bf16: a torch kernel before the swapjit one
            layer.forward(**kw)
            post.copy_(out.float())              # a torch kernel that reads the swapjit output

        # Eager once on a side stream first (torch's recipe for capture), which also gives the eager output.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        eager = out.clone()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            body()
        return case, dev, g, q_src, q, out, post, eager

    def _run(self, name, tokens, seed):
        case, dev, g, q_src, q, out, post, eager = self._graph_case(name, tokens, seed)
        ref = R.reference_of_case(case)
        out.fill_(float("nan"))  # poison: the replay must write every element
        q.zero_()
        first = None
        for i in range(REPLAYS):
            g.replay()
            torch.cuda.synchronize()
            bits = out.view(torch.int16).clone()
            if first is None:
                first = bits
                err = R.check_bf16(out.cpu(), ref)
                self.assertTrue(torch.equal(post, out.float()), "the torch op after swapjit saw another output")
                self.assertTrue(torch.equal(bits, eager.view(torch.int16)), "graph replay differs from eager")
            else:
                self.assertTrue(torch.equal(bits, first), f"replay {i} differs from replay 0")
        # A new Q written into the graph's source is what the next replay uses.
        q_new = torch.randn(q_src.shape, generator=torch.Generator().manual_seed(seed + 1)).to(torch.bfloat16)
        q_src.copy_(q_new.cuda())
        g.replay()
        torch.cuda.synchronize()
        case2 = dict(case, q=q_new)
        R.check_bf16(out.cpu(), R.reference_of_case(case2))
        self.assertFalse(torch.equal(out.view(torch.int16), first))
        return err

    def test_graph_v41_fp8_swapab(self):
        self.assertEqual(self.layers["v41_fp8"].choose(4, 128), swapjit.CHOICE_SWAPAB)
        print(f"v41_fp8 T=4 max rel L2 {self._run('v41_fp8', 4, 11):.2e}", flush=True)

    def test_graph_v41_fp8_headpad(self):
        # Past SWAPAB_MAX_TOKENS (64 since session 3) the dispatch takes the head-padded kernel.
        self.assertEqual(self.layers["v41_fp8"].choose(72, 128), swapjit.CHOICE_HEADPAD)
        print(f"v41_fp8 T=72 max rel L2 {self._run('v41_fp8', 72, 12):.2e}", flush=True)

    def test_graph_v4_fp8(self):
        print(f"v4_fp8 T=4 max rel L2 {self._run('v4_fp8', 4, 13):.2e}", flush=True)
        print(f"v4_fp8 T=16 max rel L2 {self._run('v4_fp8', 16, 14):.2e}", flush=True)

    def test_not_warmed_inside_capture(self):
        # A 32-head layer registered after warmup(): its own keys are not loaded. (Its split key, the 16-head
        # swap-AB key that steps of <= 8 tokens launch, is the warmed v41_fp8 layer's own: T = 12 is past the
        # split cap, so the step needs the 32-head key.)
        fmt = R.FORMAT_V41_FP8
        cold = swapjit.Layer(self.svc, live_heads=32, window=128, topk=512, swa_format=fmt, comp_format=fmt,
                             swa_page=64, comp_page=64, q_layout=swapjit.Q_PLAIN, out_layout=swapjit.OUT_BF16)
        try:
            dev = R.case_to(R.random_case(12, 32, fmt, fmt, seed=21), "cuda")
            out = torch.zeros(12, 32, 512, dtype=torch.bfloat16, device="cuda")
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with self.assertRaises(swapjit.SwapjitError) as cm:
                with torch.cuda.graph(g):  # its __exit__ ends the capture even as the error passes through
                    cold.forward(**R.forward_kwargs(dev, dev["q"], out, dev["sink"]))
            self.assertEqual(cm.exception.code, "not_warmed")
            self.assertEqual(cm.exception.status, 7)
            self.assertIn("warmup", str(cm.exception))
            self.assertFalse(torch.cuda.is_current_stream_capturing())
            # The process is still healthy: torch work and a warmed swapjit layer still run.
            torch.cuda.synchronize()
            self.assertEqual(float((torch.ones(4, device="cuda") * 2).sum()), 8.0)
            self.assertFalse(bool(out.view(torch.int16).any()), "the failed forward launched a kernel")
        finally:
            cold.close()
        self._run("v41_fp8", 2, 22)


if __name__ == "__main__":
    unittest.main(verbosity=2)
