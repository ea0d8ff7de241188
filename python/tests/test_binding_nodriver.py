"""The ctypes binding without a GPU driver (CI): load, version, keys, dispatch choice, warmup's no-driver
error after compiling, and config errors naming the field. Standard library only (no torch).

Run: SWAPJIT_LIBRARY=<build>/lib/libswapjit.so PYTHONPATH=python python3 -m unittest python/tests/test_binding_nodriver.py
On a machine with a driver, the no-driver assertions are skipped (the rest still runs).
"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # python/: `import swapjit` without PYTHONPATH
import swapjit  # noqa: E402

# A V4.1-Flash compressed layer of ratio 1 at TP4: SWA pages of 64 slots, compressed pages of 128 (SPEC §1).
V41_FLASH_TP4 = dict(live_heads=16, window=128, topk=512, swa_format=swapjit.FORMAT_V41_FP8,
                     comp_format=swapjit.FORMAT_V41_FP8, swa_page=64, comp_page=128,
                     q_layout=swapjit.Q_CHUNK16, out_layout=swapjit.OUT_MXFP8_OFUSED)


class BindingNoDriver(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="swapjit-py-")
        self.cache = self._tmp.name
        self.svc = swapjit.Service(cache_dirs=self.cache, jobs=2)

    def tearDown(self):
        self.svc.close()
        self._tmp.cleanup()

    def test_library_and_version(self):
        path = swapjit.library_path()
        if os.environ.get("SWAPJIT_LIBRARY"):
            self.assertEqual(path, os.environ["SWAPJIT_LIBRARY"])
        v = swapjit.version()
        self.assertIsInstance(v, str)
        self.assertRegex(v, r"^\d+\.\d+")

    def test_has_driver_is_false_here(self):
        if swapjit.has_driver():
            self.skipTest("a CUDA driver is present: the no-driver checks do not apply")
        self.assertFalse(swapjit.has_driver())
        # Without a driver the service compiles for the default arch.
        self.assertEqual(self.svc.arch, "sm_90a")

    def test_keys(self):
        layer = swapjit.Layer(self.svc, **V41_FLASH_TP4)
        keys = layer.keys()
        fams = sorted(k["family"] for k in keys)
        # swap-AB twice: the layer's 16-head key and its split steps' 8-head key
        self.assertEqual(fams, ["headpad_decode", "kv_insert", "kv_insert", "swapab_decode", "swapab_decode"])
        for k in keys:
            self.assertEqual(k["arch"], self.svc.arch)
            if k["family"] == "kv_insert":
                self.assertEqual((k["live_heads"], k["window"], k["topk"]), (0, 0, 0))
                self.assertEqual(k["swa_format"], "v41_fp8")
                self.assertEqual(k["comp_format"], "none")
            else:
                self.assertIn(k["live_heads"], (16, 8) if k["family"] == "swapab_decode" else (16,))
                self.assertEqual((k["window"], k["topk"]), (128, 512))
                self.assertEqual((k["swa_format"], k["comp_format"]), ("v41_fp8", "v41_fp8"))
                self.assertEqual((k["swa_page"], k["comp_page"]), (64, 128))
                self.assertEqual((k["q_layout"], k["out_layout"]), ("chunk16", "mxfp8_ofused"))
        # One insert key per cache: the SWA cache's pages (64) and the compressed cache's (128).
        self.assertEqual(sorted(k["swa_page"] for k in keys if k["family"] == "kv_insert"), [64, 128])

    def test_swa_only_layer_keys(self):
        layer = swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, topk=0))
        keys = layer.keys()
        self.assertEqual(sorted(k["family"] for k in keys), ["headpad_decode", "kv_insert", "swapab_decode", "swapab_decode"])
        for k in keys:
            if k["family"] != "kv_insert":
                self.assertEqual((k["topk"], k["comp_format"], k["comp_page"]), (0, "none", 0))

    def test_choose(self):
        layer = swapjit.Layer(self.svc, **V41_FLASH_TP4)
        for t in (1, 2, 16, 17, 32, 64):
            self.assertEqual(layer.choose(t, 128), swapjit.CHOICE_SWAPAB, f"{t} tokens")
        self.assertEqual(layer.choose(65, 128), swapjit.CHOICE_HEADPAD)  # past the cap (SPEC §5, measured: 64)
        # The measured cap is per head count; 64 at 32 heads too since session 10 (swapab_max_tokens=0, the default).
        tp2 = swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, live_heads=32))
        self.assertEqual(tp2.choose(64, 128), swapjit.CHOICE_SWAPAB)
        self.assertEqual(tp2.choose(65, 128), swapjit.CHOICE_HEADPAD)
        # An SWA list narrower than the window goes to the head-padded kernel (SPEC §5).
        self.assertEqual(layer.choose(4, 64), swapjit.CHOICE_HEADPAD)
        # 64 heads never use swap-AB.
        wide = swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, live_heads=64))
        self.assertEqual(wide.choose(1, 128), swapjit.CHOICE_HEADPAD)
        self.assertNotIn("swapab_decode", [k["family"] for k in wide.keys()])

    def test_launch_key_and_split_caps(self):
        # Small steps run the swap-AB key of fewer heads (two or four clusters a token); past the caps, the own key.
        tp2 = swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, live_heads=32))
        self.assertEqual(tp2.launch_key(2, 128)["live_heads"], 8)  # four clusters up to T = 2 (session 18)
        self.assertEqual(tp2.launch_key(3, 128)["live_heads"], 16)
        self.assertEqual(tp2.launch_key(9, 128)["live_heads"], 32)
        self.assertEqual(tp2.launch_key(100, 128)["family"], "headpad_decode")
        never = swapjit.Service(cache_dirs=self.cache, jobs=2, swapab_split_max_tokens=-1, swapab_split4_max_tokens=-1)
        try:
            one = swapjit.Layer(never, **dict(V41_FLASH_TP4, live_heads=32))
            self.assertEqual(one.launch_key(1, 128)["live_heads"], 32)
        finally:
            never.close()

    def test_headpad_split_caps(self):
        # A 64-head layer: the measured table (four clusters of the 16-head key at T = 1, two at T = 2, one at
        # T = 4) unless caps replace it (here: four never, two up to T = 3).
        h64 = swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, live_heads=64))
        self.assertEqual([h64.launch_key(t, 128)["live_heads"] for t in (1, 2, 4)], [16, 32, 64])
        caps = swapjit.Service(cache_dirs=self.cache, jobs=2, headpad_split_max_tokens=3, headpad_split4_max_tokens=-1)
        try:
            l64 = swapjit.Layer(caps, **dict(V41_FLASH_TP4, live_heads=64))
            self.assertEqual([l64.launch_key(t, 128)["live_heads"] for t in (1, 3, 4)], [32, 32, 64])
        finally:
            caps.close()

    def test_warmup_compiles_then_reports_no_driver(self):
        if swapjit.has_driver():
            self.skipTest("a CUDA driver is present: warmup() would succeed")
        swapjit.Layer(self.svc, **V41_FLASH_TP4)
        with self.assertRaises(swapjit.SwapjitError) as cm:
            self.svc.warmup()
        e = cm.exception
        self.assertEqual(e.status, 5)
        self.assertEqual(e.code, "no_driver")
        self.assertIn("no_driver", str(e))
        self.assertIn("5 key(s)", str(e))  # headpad, swapab (16 and 8 heads), two kv_insert
        # Every key is in the cache, committed: <root>/v1/<arch>/<family>/<digest>/COMMITTED.
        committed = list(Path(self.cache, "v1", "sm_90a").glob("*/*/COMMITTED"))
        self.assertEqual(len(committed), 5, committed)
        self.assertEqual(sorted({p.parent.parent.name for p in committed}),
                         ["headpad_decode", "kv_insert", "swapab_decode"])

    def test_bad_config_names_the_field(self):
        cases = [(dict(live_heads=0), "live_heads"), (dict(live_heads=24), "live_heads"),
                 (dict(swa_format=9), "swa_format"), (dict(comp_format=7), "comp_format"),
                 (dict(q_layout=5), "q_layout"), (dict(out_layout=0), "out_layout")]
        for change, field in cases:
            with self.subTest(field=field, change=change):
                with self.assertRaises(swapjit.SwapjitError) as cm:
                    swapjit.Layer(self.svc, **dict(V41_FLASH_TP4, **change))
                self.assertEqual(cm.exception.code, "invalid_argument")
                self.assertEqual(cm.exception.status, 1)
                self.assertIn(field, str(cm.exception))

    def test_forward_without_driver_raises(self):
        if swapjit.has_driver():
            self.skipTest("a CUDA driver is present")
        layer = swapjit.Layer(self.svc, **V41_FLASH_TP4)
        # Null pointers: either the host checks reject the step or the missing driver does; never a crash.
        with self.assertRaises(swapjit.SwapjitError) as cm:
            layer.forward(num_tokens=1, q=None, positions=None, cos_sin=None, max_pos=1, swa_slots=None,
                          swa_lens=None, swa_width=128, swa_cache=(0, 64 * 528, 1))
        self.assertIn(cm.exception.code, ("invalid_argument", "no_driver"))

    def test_host_tensor_is_refused(self):
        class HostTensor:  # what the binding sees of a torch CPU tensor
            is_cuda, device = False, "cpu"

            def data_ptr(self):
                return 4096

        layer = swapjit.Layer(self.svc, **V41_FLASH_TP4)
        with self.assertRaises(swapjit.SwapjitError) as cm:
            layer.forward(num_tokens=1, q=HostTensor(), positions=None, cos_sin=None, max_pos=1, swa_slots=None,
                          swa_lens=None, swa_width=128, swa_cache=(0, 64 * 528, 1))
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertIn("q is a tensor on cpu", str(cm.exception))

    def test_path_cache_dir(self):
        svc = swapjit.Service(cache_dirs=Path(self.cache) / "sub")
        try:
            self.assertEqual(swapjit.Layer(svc, **V41_FLASH_TP4).keys()[0]["arch"], svc.arch)
        finally:
            svc.close()

    def test_error_class(self):
        e = swapjit.SwapjitError(7, "x")
        self.assertEqual(e.code, "not_warmed")
        self.assertEqual(swapjit.SwapjitError(99, "x").code, "unknown")
        self.assertIsInstance(e, RuntimeError)


if __name__ == "__main__":
    unittest.main()
