"""The pure-CPU parts of tools/tp_decode.py (no torch, no GPU): arguments, head slices, the cache scan and
the compiled-exactly-once check over a fake cache directory."""
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import tp_decode as tp  # noqa: E402


def fake_entry(root, family, digest, key, pid, host="h", committed=True, arch="sm_90a"):
    d = Path(root, "v1", arch, family, digest)
    d.mkdir(parents=True)
    (d / "kernel.cubin").write_bytes(b"\0" * 8)
    (d / "manifest.json").write_text(json.dumps({"key": key, "digest": digest, "created_by_pid": pid,
                                                 "created_on_host": host}, indent=2))
    if committed:
        (d / "COMMITTED").write_text("1\n")
    return d


KEY_A = {"family": "swapab_decode", "live_heads": 32, "window": 128}
KEY_B = {"live_heads": 32, "family": "headpad_decode", "window": 128}
KEY_C = {"family": "kv_insert", "swa_page": 64}


class Args(unittest.TestCase):
    def test_defaults(self):
        a = tp.parse_args([])
        self.assertEqual(a.token_counts, [1, 4, 16])
        self.assertEqual(a.kv, "v41_fp8")
        self.assertFalse(a.tp4_layers or a.same_gpu)
        self.assertEqual((a.window, a.topk), (128, 512))
        self.assertIsNone(a.json)

    def test_flags(self):
        a = tp.parse_args(["--tp4-layers", "--same-gpu", "--kv", "v4_fp8", "--tokens", "2,5", "--json", "x.json",
                           "--comp-page", "128"])
        self.assertTrue(a.tp4_layers and a.same_gpu)
        self.assertEqual(tp.KV_PAIRINGS[a.kv], ("v4_fp8", "v4_fp8"))
        self.assertEqual(tp.KV_PAIRINGS["v41_fp4"], ("v41_fp8", "v41_fp4"))
        self.assertEqual(a.token_counts, [2, 5])
        self.assertEqual((a.json, a.comp_page), ("x.json", 128))

    def test_bad_args(self):
        import contextlib
        import io
        for argv in (["--kv", "fp16"], ["--tokens", "1,x"], ["--tokens", "0"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit):
                    tp.parse_args(argv)


class Slices(unittest.TestCase):
    def test_plain_tp(self):
        self.assertEqual(tp.head_slices(1, 0), [(0, 64)])
        self.assertEqual(tp.head_slices(2, 0), [(0, 32)])
        self.assertEqual(tp.head_slices(2, 1), [(32, 32)])
        self.assertEqual(tp.head_slices(4, 3), [(48, 16)])
        self.assertEqual(tp.head_slices(8, 7), [(56, 8)])

    def test_tp4_layers(self):
        self.assertEqual(tp.head_slices(2, 0, tp4_layers=True), [(0, 16), (16, 16)])
        self.assertEqual(tp.head_slices(2, 1, tp4_layers=True), [(32, 16), (48, 16)])
        self.assertEqual(tp.head_slices(1, 0, tp4_layers=True), [(0, 16), (16, 16), (32, 16), (48, 16)])
        self.assertEqual(tp.head_slices(4, 2, tp4_layers=True), [(32, 16)])

    def test_slices_cover_every_head_once(self):
        for world in (1, 2, 4, 8):
            for tp4 in ((False, True) if world <= 4 else (False,)):
                heads = [h for r in range(world) for h0, n in tp.head_slices(world, r, tp4) for h in range(h0, h0 + n)]
                self.assertEqual(heads, list(range(64)), (world, tp4))

    def test_bad(self):
        for world, rank, tp4 in ((3, 0, False), (2, 2, False), (0, 0, False), (8, 0, True)):
            with self.subTest(world=world, rank=rank, tp4=tp4):
                with self.assertRaises(ValueError):
                    tp.head_slices(world, rank, tp4)


class CacheCheck(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def distinct(self):
        return {tp.canonical(k) for k in (KEY_A, KEY_B, KEY_C)}

    def test_clean_cache_passes(self):
        fake_entry(self.root, "swapab_decode", "d1", KEY_A, pid=10)
        fake_entry(self.root, "headpad_decode", "d2", KEY_B, pid=11)
        fake_entry(self.root, "kv_insert", "d3", KEY_C, pid=10)
        Path(self.root, "v1", "locks").mkdir()
        Path(self.root, "v1", "locks", "d1.lock").write_text("")  # lock files stay: not a problem
        Path(self.root, "v1", "tmp").mkdir()  # an empty tmp dir is fine
        scan = tp.scan_cache(self.root)
        self.assertEqual(len(scan["entries"]), 3)
        self.assertEqual(tp.check_cache(scan, self.distinct()), [])
        self.assertEqual(len(tp.compiled_by(scan, 10, "h")), 2)
        self.assertEqual(len(tp.compiled_by(scan, 11, "h")), 1)
        self.assertEqual(len(tp.compiled_by(scan, 10, "other")), 0)

    def test_key_field_order_does_not_matter(self):
        self.assertEqual(tp.canonical(KEY_A), tp.canonical(dict(reversed(list(KEY_A.items())))))

    def test_duplicate_compile_fails(self):
        fake_entry(self.root, "swapab_decode", "d1", KEY_A, pid=10)
        fake_entry(self.root, "swapab_decode", "d1b", KEY_A, pid=11)  # same key twice
        fake_entry(self.root, "headpad_decode", "d2", KEY_B, pid=11)
        fake_entry(self.root, "kv_insert", "d3", KEY_C, pid=10)
        problems = tp.check_cache(tp.scan_cache(self.root), self.distinct())
        self.assertTrue(any("4 cache entries for 3" in p for p in problems), problems)
        self.assertTrue(any("more than one entry" in p for p in problems), problems)

    def test_missing_key_fails(self):
        fake_entry(self.root, "swapab_decode", "d1", KEY_A, pid=10)
        problems = tp.check_cache(tp.scan_cache(self.root), self.distinct())
        self.assertTrue(any("missing keys" in p for p in problems), problems)

    def test_leftovers_fail(self):
        for fam, d, k in (("swapab_decode", "d1", KEY_A), ("headpad_decode", "d2", KEY_B), ("kv_insert", "d3", KEY_C)):
            fake_entry(self.root, fam, d, k, pid=1)
        Path(self.root, "v1", "tmp", "d4.123.0.ab").mkdir(parents=True)
        Path(self.root, "v1", "quarantine", "d1.1700000000.x").mkdir(parents=True)
        fake_entry(self.root, "kv_insert", "d5", KEY_C, pid=1, committed=False)
        problems = tp.check_cache(tp.scan_cache(self.root), self.distinct())
        self.assertTrue(any(p.startswith("tmp dirs left") for p in problems), problems)
        self.assertTrue(any(p.startswith("quarantine dirs left") for p in problems), problems)
        self.assertTrue(any(p.startswith("uncommitted entry") for p in problems), problems)

    def test_empty_or_absent_root(self):
        scan = tp.scan_cache(Path(self.root, "nothing"))
        self.assertEqual(scan["entries"], [])
        self.assertEqual(tp.check_cache(scan, set()), [])
        self.assertTrue(tp.check_cache(scan, self.distinct()))

    def test_module_imports_without_torch(self):
        self.assertNotIn("torch", sys.modules.get("tp_decode").__dict__)


if __name__ == "__main__":
    unittest.main()
