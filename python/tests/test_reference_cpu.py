"""python/swapjit/reference.py on the CPU: hand-worked records and steps (SPEC §4 asks for some cases worked
out by hand to the byte), the exact fma emulation, writer/decoder round trips. Skips without torch."""
import math
import struct
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import torch
except ImportError:  # CI has no torch: every test here skips
    torch = None

if torch is not None:
    from swapjit import reference as R


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


@unittest.skipIf(torch is None, "torch not installed")
class Records(unittest.TestCase):
    def test_e4m3_table_and_encode_round_trip(self):
        self.assertEqual(R.e4m3_value(0x38), 1.0)
        self.assertEqual(R.e4m3_value(0x7E), 448.0)
        self.assertEqual(R.e4m3_value(0x01), 2.0 ** -9)
        self.assertTrue(math.isnan(R.e4m3_value(0x7F)) and math.isnan(R.e4m3_value(0xFF)))
        codes = [c for c in range(256) if c not in (0x7F, 0xFF)]
        vals = torch.tensor([R.e4m3_value(c) for c in codes], dtype=torch.float64)
        vals[codes.index(0x80)] = -0.0
        self.assertEqual(R.e4m3_encode(vals).tolist(), codes)
        # Ties to even, saturation, signed zero.
        v = torch.tensor([1.0625, 1.1875, 500.0, -1e9, -2.0 ** -11, 2.0 ** -10, 3 * 2.0 ** -10], dtype=torch.float64)
        self.assertEqual(R.e4m3_encode(v).tolist(), [0x38, 0x3A, 0x7E, 0xFE, 0x80, 0x00, 0x02])

    def test_e2m1_encode(self):
        v = torch.tensor([6.0, -0.25, 0.75, 5.0, 1.25, 1.75, 2.5, 3.5, 7.0, -0.1, 0.26, 2.9], dtype=torch.float64)
        self.assertEqual(R.e2m1_encode(v).tolist(), [7, 8, 2, 6, 2, 4, 4, 6, 7, 8, 1, 5])

    def test_v41_fp8_by_hand(self):
        row = torch.ones(1, 512, dtype=torch.bfloat16)
        row[0, 5] = 3.5    # tile 0: amax 3.5, sf = 3.5/448 = 2^-7 exactly: e = -7, byte 120
        row[0, 32:64] = 0  # tile 1: all zero: sf = 1e-4, e = ceil(log2(1e-4)) = -13, byte 114
        row[0, 64] = -0.0
        data, scale = R.encode_rows(row, R.FORMAT_V41_FP8)
        # Tile 2 (dims 64..95): ones and a -0: amax 1, log2(fl32(1/448)) = -8.8: e = -8, byte 119.
        self.assertEqual(scale[0, :3].tolist(), [120, 114, 119])
        self.assertEqual(data[0, 0], 0x70)   # 1.0 * 2^7 = 128: exponent field 14, mantissa 0
        self.assertEqual(data[0, 5], 0x7E)   # 3.5 * 2^7 = 448
        self.assertEqual(data[0, 32], 0x00)
        self.assertEqual(data[0, 64], 0x80)  # -0 keeps its sign
        self.assertEqual(data[0, 65], 0x78)  # 1.0 * 2^8 = 256
        back = R.decode_records(data, scale, R.FORMAT_V41_FP8)
        self.assertTrue(torch.equal(back, row.double()))

    def test_v4_fp8_by_hand(self):
        row = torch.full((1, 512), 0.5, dtype=torch.bfloat16)
        row[0, 448] = 1.0 / 3  # a RoPE dim: stored as the bf16 itself
        data, scale = R.encode_rows(row, R.FORMAT_V4_FP8)
        self.assertEqual(tuple(data.shape), (1, 576))
        self.assertEqual(tuple(scale.shape), (1, 8))
        # amax 0.5: sf = fl32(0.5/448), log2 = -9.807..: e = -9, byte 118; 0.5 * 2^9 = 256: code 0x78
        self.assertEqual(scale[0].tolist(), [118] * 7 + [0])
        self.assertEqual(data[0, 0], 0x78)
        bits = struct.unpack("<I", struct.pack("<f", 1.0 / 3))[0]
        rne = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # bf16 RN of the fp32 1/3
        self.assertEqual(int(data[0, 448]) | (int(data[0, 449]) << 8), rne)
        self.assertTrue(torch.equal(R.decode_records(data, scale, R.FORMAT_V4_FP8), row.double()))

    def test_v41_fp4_by_hand(self):
        row = torch.zeros(1, 512, dtype=torch.bfloat16)
        row[0, :4] = torch.tensor([6.0, -0.25, 0.75, 5.0])  # amax 6: scale e4m3(1.0) = 0x38
        data, scale = R.encode_rows(row, R.FORMAT_V41_FP4)
        self.assertEqual(scale[0, 0], 0x38)
        self.assertEqual(data[0, 0], 7 | (8 << 4))  # even dim low nibble: 6 -> 7, -0.25 -> -0 (8)
        self.assertEqual(data[0, 1], 2 | (6 << 4))  # 0.75 -> 1.0 (2), 5 -> 4 (6): ties to even
        self.assertEqual(scale[0, 1], R.e4m3_encode(torch.tensor([2.0 ** -9], dtype=torch.float64))[0])

    def test_round_trip_random(self):
        g = torch.Generator().manual_seed(1)
        rows = (torch.randn(64, 512, generator=g) * 3).to(torch.bfloat16)
        for fmt in (R.FORMAT_V41_FP8, R.FORMAT_V4_FP8, R.FORMAT_V41_FP4):
            cache = R.PagedCache(fmt, page=64, pages=2, page_stride=None)
            slots = torch.randperm(128, generator=g)[:64].to(torch.int32)
            cache.write(slots, rows)
            back = cache.read(slots)
            rel = ((back - rows.double()).norm(dim=1) / rows.double().norm(dim=1)).max().item()
            self.assertLess(rel, 0.2 if fmt == R.FORMAT_V41_FP4 else 0.04, fmt)
            # Every format decodes exactly to bf16 (§2.2).
            self.assertTrue(torch.equal(back.to(torch.bfloat16).double(), back), fmt)
            # Slots not written stay untouched (zero).
            unwritten = torch.tensor(sorted(set(range(128)) - set(slots.tolist())), dtype=torch.int32)
            self.assertEqual(float(cache.read(unwritten).abs().max()), 0.0)

    def test_page_layout(self):
        c = R.PagedCache(R.FORMAT_V41_FP8, page=64, pages=3, page_stride=64 * 528 + 32)
        c.write(torch.tensor([65], dtype=torch.int32), torch.ones(1, 512, dtype=torch.bfloat16))
        base = c.page_stride  # page 1, offset 1
        # All ones: amax 1, e = -8: data 1 * 2^8 = 256 = 0x78, scale byte 119.
        self.assertEqual(int(c.buf[base + 512]), 0x78)  # data row 1 of page 1 starts at 512
        self.assertEqual(int(c.buf[base + 64 * 512 + 16]), 119)  # scale row 1 after the 64 data rows
        self.assertEqual(int((c.buf != 0).sum()), 512 + 16)


@unittest.skipIf(torch is None, "torch not installed")
class Math(unittest.TestCase):
    def test_fma32_matches_exact_rounding(self):
        g = torch.Generator().manual_seed(2)
        a = torch.randn(20000, generator=g)
        b = torch.randn(20000, generator=g)
        c = -(a * b) * (1 + torch.randn(20000, generator=g) * 1e-6)  # heavy cancellation
        got = R.fma32(a, b, c)
        from fractions import Fraction

        def rn32(fr):
            # The fp32 nearest to the exact fr (ties to even): the nearest of f32(float(fr)) and its neighbours.
            w = f32(float(fr))
            b = f32_bits(w)
            cands = [w] + [struct.unpack("<f", struct.pack("<I", n))[0] for n in (b - 1, b + 1) if 0 <= n < 2**32]
            return min(cands, key=lambda v: (abs(Fraction(v) - fr), f32_bits(v) & 1))

        for i in range(0, 20000, 41):
            exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
            self.assertEqual(f32_bits(float(got[i])), f32_bits(rn32(exact)), i)
        # A case where fp64 rounding of the sum then fp32 rounding would differ from one fp32 rounding.
        x = torch.tensor([1.0 + 2.0 ** -23]), torch.tensor([1.0 + 2.0 ** -23]), torch.tensor([-(2.0 ** -60)])
        # exact = 1 + 2^-22 + 2^-46 - 2^-60: one rounding gives 1 + 2^-22.
        self.assertEqual(f32_bits(float(R.fma32(*x)[0])), f32_bits(1.0 + 2.0 ** -22))
        y = torch.tensor([1.0 + 2.0 ** -12]), torch.tensor([1.0 + 2.0 ** -12]), torch.tensor([2.0 ** -70])
        # exact = 1 + 2^-11 + 2^-24 + 2^-70: just above the fp32 midpoint: rounds up (fp64 alone would tie).
        self.assertEqual(f32_bits(float(R.fma32(*y)[0])), f32_bits(1.0 + 2.0 ** -11) + 1)

    def _cos_sin(self, max_pos):
        pos = torch.arange(max_pos, dtype=torch.float64)[:, None]
        ang = pos * 10000.0 ** (-torch.arange(32, dtype=torch.float64) / 32)
        return torch.cat([ang.cos(), ang.sin()], dim=1).float()

    def test_one_key_by_hand(self):
        # q = 1 on dims 0..447 and 0 on the RoPE dims (RoPE of zeros is zero); the key is all ones
        # (v41_fp8 code 0x38, scale byte 127), so z = sm_scale * 448 and o = k / (1 + exp(sink - z)).
        cs = self._cos_sin(64)
        q = torch.zeros(1, 2, 512, dtype=torch.bfloat16)
        q[:, :, :448] = 1
        cache = R.PagedCache(R.FORMAT_V41_FP8, page=64, pages=1)
        cache.buf[512 * 3: 512 * 4] = 0x38  # data row of slot 3
        cache.buf[64 * 512 + 16 * 3: 64 * 512 + 16 * 4] = 127
        slots = torch.full((1, 128), -1, dtype=torch.int32)
        slots[0, 7] = 3
        sink = torch.tensor([0.5, -math.inf])
        out = R.reference_step(q, torch.tensor([9]), cs, slots, torch.tensor([128], dtype=torch.int32), cache,
                               sink=sink)
        z = R.fp32(512 ** -0.5) * 448
        c, s = cs[9, :32].double(), cs[9, 32:].double()
        for h, w in ((0, 1 / (1 + math.exp(0.5 - z))), (1, 1.0)):
            self.assertTrue(torch.allclose(out[0, h, :448], torch.full((448,), w, dtype=torch.float64), rtol=0,
                                           atol=1e-15))
            self.assertTrue(torch.allclose(out[0, h, 448::2], w * (c + s), rtol=0, atol=1e-15))
            self.assertTrue(torch.allclose(out[0, h, 449::2], w * (c - s), rtol=0, atol=1e-15))

    def test_empty_token_and_lengths(self):
        cs = self._cos_sin(16)
        g = torch.Generator().manual_seed(3)
        cache = R.PagedCache(R.FORMAT_V4_FP8, page=64, pages=2)
        cache.write(torch.arange(128, dtype=torch.int32), torch.randn(128, 512, generator=g).to(torch.bfloat16))
        q = torch.randn(3, 4, 512, generator=g).to(torch.bfloat16)
        slots = torch.randint(0, 128, (3, 128), generator=g, dtype=torch.int32)
        lens = torch.tensor([0, 128, 5], dtype=torch.int32)
        slots[1, :] = -1  # token 1: full length, every slot -1: no used entry
        out = R.reference_step(q, torch.tensor([0, 15, 3]), cs, slots, lens, cache)
        self.assertEqual(float(out[0].abs().max()), 0.0)
        self.assertEqual(float(out[1].abs().max()), 0.0)
        self.assertGreater(float(out[2].abs().max()), 0.0)
        # Entries past len are ignored; a duplicate counts twice.
        slots2 = slots.clone()
        slots2[2, 5:] = 0
        out2 = R.reference_step(q, torch.tensor([0, 15, 3]), cs, slots2, lens, cache)
        self.assertTrue(torch.equal(out, out2))
        dup = slots.clone()
        dup[2, 1] = dup[2, 0]
        dup2 = R.reference_step(q, torch.tensor([0, 15, 3]), cs, dup, lens, cache)
        self.assertFalse(torch.equal(dup2[2], out[2]))

    def test_two_lists_are_one_softmax(self):
        cs = self._cos_sin(8)
        g = torch.Generator().manual_seed(4)
        swa = R.PagedCache(R.FORMAT_V41_FP8, page=64, pages=1)
        comp = R.PagedCache(R.FORMAT_V41_FP4, page=128, pages=1)
        swa.write(torch.arange(64, dtype=torch.int32), torch.randn(64, 512, generator=g).to(torch.bfloat16))
        comp.write(torch.arange(128, dtype=torch.int32), torch.randn(128, 512, generator=g).to(torch.bfloat16))
        q = torch.randn(1, 8, 512, generator=g).to(torch.bfloat16)
        s1 = torch.arange(4, dtype=torch.int32)[None]
        c1 = torch.arange(6, dtype=torch.int32)[None]
        one = torch.tensor([4], dtype=torch.int32)
        out = R.reference_step(q, torch.tensor([2]), cs, s1, one, swa, c1, torch.tensor([6], dtype=torch.int32), comp)
        # The same as a softmax over the six compressed keys alone plus the four SWA keys, computed directly.
        qr = R.rope_q(q, torch.tensor([2]), cs).double()[0]
        k = torch.cat([swa.read(s1[0].long()), comp.read(c1[0].long())])
        p = torch.softmax(R.fp32(512 ** -0.5) * qr @ k.T, dim=1)
        want = R.inverse_rope((p @ k)[None], torch.tensor([2]), cs)
        self.assertTrue(torch.allclose(out, want, rtol=1e-12, atol=1e-14))

    def test_check_bf16(self):
        ref = torch.randn(2, 3, 512, dtype=torch.float64)
        self.assertLess(R.check_bf16(ref.to(torch.bfloat16), ref), 5e-3)
        bad = ref.clone()
        bad[1, 2, 0] += 10
        with self.assertRaises(AssertionError):
            R.check_bf16(bad, ref)
        bad[1, 2, 0] = math.nan
        with self.assertRaises(AssertionError):
            R.check_bf16(bad, ref)
        # An all-zero reference row (an empty token) needs exact zeros.
        ref[0, 1] = 0
        out = ref.to(torch.bfloat16)
        self.assertLess(R.check_bf16(out, ref), 5e-3)
        out[0, 1, 7] = 1e-6
        with self.assertRaises(AssertionError):
            R.check_bf16(out, ref)


if __name__ == "__main__":
    unittest.main()
