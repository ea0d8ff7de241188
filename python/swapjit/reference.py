"""fp64 reference of one swapjit decode step (SPEC.md §2-§4) in torch, plus the record writer (§2.3).

torch is imported lazily (the binding itself needs only the standard library). Everything here runs on the
CPU in float64 except where SPEC fixes a rounding point:
- Q RoPE (§3.2 step 2) is bit-exact: fp32 fma emulated exactly (exact fp64 product, TwoSum, round-to-odd
  to 53 bits, then one rounding to fp32: round-to-odd with >= 2 extra bits makes the double rounding
  innocuous), then bf16 RN. fp32 subnormal results (|y| < 2^-126) are not handled specially (they would
  need a flush-free fp32 path; RoPE of bf16 queries never gets there in practice).
- Records decode exactly (every format is exactly a bf16 value, §2.2) through 256-entry tables.
- The writer follows §2.3 with its own exact integer/table arithmetic (not torch's float8 casts, whose
  out-of-range behaviour is NaN rather than satfinite).

Layout of a cache (§2.1): pages of P slots; a page holds P data rows of D bytes, then P scale rows of S
bytes, then padding up to page_stride bytes.
"""
import math

FORMAT_V41_FP8, FORMAT_V41_FP4, FORMAT_V4_FP8 = 1, 2, 3
# (data bytes D, scale bytes S) of a slot, §2.2.
RECORD_BYTES = {FORMAT_V41_FP8: (512, 16), FORMAT_V41_FP4: (256, 32), FORMAT_V4_FP8: (576, 8)}
FORMAT_NAMES = {"v41_fp8": FORMAT_V41_FP8, "v41_fp4": FORMAT_V41_FP4, "v4_fp8": FORMAT_V4_FP8}
SM_SCALE = 512 ** -0.5
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _torch():
    import torch  # noqa: PLC0415 (lazy: the CI tests of the binding run without torch)
    return torch


def fp32(x):
    """x rounded to the nearest fp32, as a Python float (e.g. sm_scale as the kernel receives it)."""
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def e4m3_value(code):
    """The value of an OCP e4m3fn byte (NaN for 0x7F/0xFF)."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return math.nan
    return sign * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def _tables(device):
    torch = _torch()
    e4m3 = torch.tensor([e4m3_value(c) for c in range(256)], dtype=torch.float64, device=device)
    ue8m0 = torch.tensor([math.nan if b == 255 else 2.0 ** (b - 127) for b in range(256)], dtype=torch.float64,
                         device=device)
    e2m1 = torch.tensor([(-1 if c & 8 else 1) * E2M1_VALUES[c & 7] for c in range(16)], dtype=torch.float64,
                        device=device)
    return e4m3, ue8m0, e2m1


# ---------------------------------------------------------------------------------------------- encoders

def e4m3_encode(v):
    """e4m3_rn_satfinite of float64 values (exactly fp32 values): nearest, ties to even, saturate at 448.
    NaN -> 0x7F. Negative values rounding to zero keep the sign (0x80). Returns uint8."""
    torch = _torch()
    pos = torch.tensor([e4m3_value(c) for c in range(127)], dtype=torch.float64, device=v.device)  # 0..448
    a = v.abs().clamp(max=448.0)
    hi = torch.searchsorted(pos, a.contiguous()).clamp(1, 126)  # first value >= a (a <= 448: hi <= 126)
    lo = hi - 1
    d_lo, d_hi = a - pos[lo], pos[hi] - a
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))  # tie: the even code (mantissa lsb 0)
    code = torch.where(take_hi, hi, lo)
    code = torch.where(a == 0, torch.zeros_like(code), code)
    code = code | torch.where(torch.signbit(v), 0x80, 0).to(code.dtype)
    code = torch.where(torch.isnan(v), torch.full_like(code, 0x7F), code)
    return code.to(torch.uint8)


def e2m1_encode(v):
    """Nearest E2M1 code of float64 values, ties to even, saturating at +-6; sign bit kept for -0 results."""
    torch = _torch()
    a = v.abs()
    code = torch.zeros(v.shape, dtype=torch.int64, device=v.device)
    # Boundary between index i and i+1: a tie goes to the even index, so strict when i is even, >= when odd.
    for i, t in enumerate((0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)):
        code += ((a > t) if i % 2 == 0 else (a >= t)).to(torch.int64)
    code |= torch.signbit(v).to(torch.int64) << 3
    return code.to(torch.uint8)


def _ue8m0_exponent(amax32):
    """e = ceil(log2(max(fl32(amax / 448), 1e-4))) from fp32 amax, by the bit rule of §2.3."""
    torch = _torch()
    sf = torch.clamp(amax32 / torch.tensor(448.0, dtype=torch.float32), min=fp32(1e-4))  # fp32 division
    bits = sf.view(torch.int32).to(torch.int64)
    return ((bits - 1) >> 23) - 126


def _fp8_tiles(x32, tile):
    """UE8M0-scaled e4m3 of fp32 rows [n, k*tile]: (data uint8 [n, k*tile], scale bytes uint8 [n, k])."""
    torch = _torch()
    n, d = x32.shape
    t = x32.reshape(n, d // tile, tile)
    bad = ~torch.isfinite(t).all(dim=2)
    amax = t.abs().nan_to_num(0.0, posinf=0.0).amax(dim=2)
    e = _ue8m0_exponent(amax)
    scaled = t.double() * torch.pow(2.0, -e.double()).unsqueeze(2)  # exact: a power of two
    # A NaN/inf tile: scale byte 255; its data is unspecified (§2.3): 0x7F, as reference/paged_cache.cpp.
    data = torch.where(bad.unsqueeze(2), 0x7F, e4m3_encode(scaled).to(torch.int64)).to(torch.uint8).reshape(n, d)
    scale = torch.where(bad, 255, e + 127).to(torch.uint8)
    return data, scale


def encode_rows(rows, fmt):
    """Records of bf16 rows [n, 512] (RoPE already applied) in format fmt: (data [n, D], scale [n, S]) uint8."""
    torch = _torch()
    x32 = rows.to(torch.bfloat16).float()
    n = x32.shape[0]
    if fmt == FORMAT_V41_FP8:
        return _fp8_tiles(x32, 32)
    if fmt == FORMAT_V4_FP8:
        data, scale = _fp8_tiles(x32[:, :448], 64)
        rope = rows[:, 448:].to(torch.bfloat16).contiguous().view(torch.uint8)  # little-endian bf16
        pad = torch.zeros(n, 1, dtype=torch.uint8, device=rows.device)
        return torch.cat([data, rope], dim=1), torch.cat([scale, pad], dim=1)
    if fmt == FORMAT_V41_FP4:
        t = x32.reshape(n, 32, 16)
        bad = ~torch.isfinite(t).all(dim=2)
        amax = t.abs().nan_to_num(0.0, posinf=0.0).amax(dim=2)
        s_in = torch.clamp(amax / torch.tensor(6.0, dtype=torch.float32), 2.0 ** -9, 448.0)
        s_code = e4m3_encode(s_in.double())
        e4m3, _, _ = _tables(rows.device)
        s_val = e4m3[s_code.long()].float()  # the stored scale, exactly
        q = (t / s_val.unsqueeze(2)).double()  # an IEEE fp32 division, as §2.3 says
        codes = e2m1_encode(q).to(torch.int64)
        codes = torch.where(bad.unsqueeze(2), 0, codes).reshape(n, 512)  # unspecified (§2.3): 0, as the C++
        data = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)  # even dim in the low nibble
        scale = torch.where(bad, torch.full_like(s_code, 0x7F), s_code)
        return data, scale
    raise ValueError(f"unknown record format {fmt}")


def decode_records(data, scale, fmt):
    """Exact values (float64 [n, 512]) of records given as data [n, D] and scale [n, S] uint8 rows."""
    torch = _torch()
    e4m3, ue8m0, e2m1 = _tables(data.device)
    if fmt == FORMAT_V41_FP8:
        return e4m3[data.long()] * ue8m0[scale.long()].repeat_interleave(32, dim=1)
    if fmt == FORMAT_V4_FP8:
        nope = e4m3[data[:, :448].long()] * ue8m0[scale[:, :7].long()].repeat_interleave(64, dim=1)
        rope = data[:, 448:].contiguous().view(torch.bfloat16).double()
        return torch.cat([nope, rope], dim=1)
    if fmt == FORMAT_V41_FP4:
        d = data.long()
        codes = torch.stack([d & 15, d >> 4], dim=2).reshape(d.shape[0], 512)
        return e2m1[codes] * e4m3[scale.long()].repeat_interleave(16, dim=1)
    raise ValueError(f"unknown record format {fmt}")


# ---------------------------------------------------------------------------------------------- caches

class PagedCache:
    """One paged KV cache: buf uint8 [pages * page_stride] (any device), P slots a page, format fmt."""

    def __init__(self, fmt, page, pages, page_stride=None, device="cpu", fill=0):
        torch = _torch()
        self.fmt, self.page, self.pages = fmt, page, pages
        self.D, self.S = RECORD_BYTES[fmt]
        need = page * (self.D + self.S)
        self.page_stride = page_stride if page_stride is not None else (need + 15) // 16 * 16
        if self.page_stride < need or self.page_stride % 16:
            raise ValueError(f"page_stride {self.page_stride}: needs >= {need} and a multiple of 16")
        self.buf = torch.full((pages * self.page_stride,), fill, dtype=torch.uint8, device=device)

    @property
    def slots(self):
        return self.page * self.pages

    def _offsets(self, slots):
        torch = _torch()
        s = slots.to(torch.int64).to(self.buf.device)
        page, off = s // self.page, s % self.page
        base = page * self.page_stride
        return base + off * self.D, base + self.page * self.D + off * self.S

    def write(self, slots, rows):
        """Writes bf16 rows [n, 512] at slots [n] (-1 = skip), §2.3."""
        torch = _torch()
        keep = slots >= 0
        slots, rows = slots[keep], rows[keep.to(rows.device)]
        data, scale = encode_rows(rows.to(self.buf.device), self.fmt)
        d0, s0 = self._offsets(slots)
        self.buf[d0.unsqueeze(1) + torch.arange(self.D, device=self.buf.device)] = data
        self.buf[s0.unsqueeze(1) + torch.arange(self.S, device=self.buf.device)] = scale

    def read(self, slots):
        """Exact float64 [n, 512] of the records at slots [n] (all >= 0)."""
        torch = _torch()
        d0, s0 = self._offsets(slots)
        data = self.buf[d0.unsqueeze(1) + torch.arange(self.D, device=self.buf.device)]
        scale = self.buf[s0.unsqueeze(1) + torch.arange(self.S, device=self.buf.device)]
        return decode_records(data.cpu(), scale.cpu(), self.fmt)

    def ref(self):
        """(base, page_stride, pages): the form swapjit.Layer.forward takes."""
        return (self.buf, self.page_stride, self.pages)

    def to(self, device):
        c = PagedCache.__new__(PagedCache)
        c.__dict__.update(self.__dict__)
        c.buf = self.buf.to(device)
        return c


# ---------------------------------------------------------------------------------------------- math

def fma32(a, b, c):
    """fp32 fma(a, b, c) of fp32 tensors, exactly rounded once (see the module comment)."""
    torch = _torch()
    p = a.double() * b.double()  # exact: 24 x 24 bits
    cd = c.double()
    s = p + cd
    bb = s - p  # TwoSum: e is the exact residual p + cd - s
    e = (p - (s - bb)) + (cd - bb)
    even = (s.view(torch.int64) & 1) == 0
    toward = torch.where(e > 0, torch.full_like(s, math.inf), torch.full_like(s, -math.inf))
    s_odd = torch.where((e != 0) & even, torch.nextafter(s, toward), s)  # round to odd
    return s_odd.float()


def rope_q(q, positions, cos_sin):
    """§3.2 step 2: q bf16 [T, H, 512] -> bf16 [T, H, 512], RoPE on dims 448..511 (GPT-J pairs)."""
    torch = _torch()
    cs = cos_sin.float().cpu()[positions.long().cpu()]  # [T, 64]
    c, s = cs[:, None, :32], cs[:, None, 32:]
    x = q.to(torch.bfloat16).float().cpu()
    x0, x1 = x[..., 448::2], x[..., 449::2]
    y0 = fma32(x0.expand_as(x0), c.expand_as(x0), -(x1 * s))
    y1 = fma32(x0.expand_as(x0), s.expand_as(x0), x1 * c)
    out = x.clone()
    out[..., 448::2], out[..., 449::2] = y0, y1
    return out.to(torch.bfloat16)


def inverse_rope(o, positions, cos_sin):
    """§3.2 step 7 in float64: o [T, H, 512]."""
    cs = cos_sin.double().cpu()[positions.long().cpu()]
    c, s = cs[:, None, :32], cs[:, None, 32:]
    x0, x1 = o[..., 448::2].clone(), o[..., 449::2].clone()
    o = o.clone()
    o[..., 448::2] = x0 * c + x1 * s
    o[..., 449::2] = -x0 * s + x1 * c
    return o


def reference_step(q, positions, cos_sin, swa_slots, swa_lens, swa_cache, comp_slots=None, comp_lens=None,
                   comp_cache=None, sink=None, sm_scale=SM_SCALE):
    """One decode step (§3.2 steps 1-7) in float64 on the CPU: float64 [T, H, 512].

    q: bf16 [T, H, 512] plain (the live heads); positions int64 [T]; cos_sin fp32 [max_pos, 64];
    *_slots int32 [T, width]; *_lens int32 [T]; caches: PagedCache; sink fp32 [H] or None.
    Tokens with no used entry give zeros. sm_scale is rounded to fp32 first, as the kernel receives it."""
    torch = _torch()
    T, H, _ = q.shape
    qr = rope_q(q, positions, cos_sin).double()
    scale = fp32(sm_scale)
    sinkd = None if sink is None else sink.float().double().cpu()
    out = torch.zeros(T, H, 512, dtype=torch.float64)
    lists = [(swa_slots, swa_lens, swa_cache)]
    if comp_cache is not None and comp_slots is not None:
        lists.append((comp_slots, comp_lens, comp_cache))
    for t in range(T):
        keys = []
        for slots, lens, cache in lists:
            row = slots[t].cpu().long()
            n = int(lens[t])
            used = row[:max(0, min(n, row.numel()))]
            used = used[used >= 0]  # duplicates stay: each occurrence counts
            if used.numel():
                keys.append(cache.read(used))
        if not keys:
            continue
        k = torch.cat(keys, dim=0)  # [n, 512], K = V
        z = scale * (qr[t] @ k.T)  # [H, n]
        m = z.max(dim=1, keepdim=True).values
        p = torch.exp(z - m)
        denom = p.sum(dim=1, keepdim=True)
        if sinkd is not None:
            denom = denom + torch.exp(sinkd.unsqueeze(1) - m)
        out[t] = (p @ k) / denom
    return inverse_rope(out, positions, cos_sin)


def rel_l2_per_head(out, ref):
    """Per (token, head) ||out - ref|| / ||ref|| ([T, H] float64). A row whose reference is all zero (an
    empty token) needs exact zeros: 0 if out is zero there, inf otherwise (as reference/compare.cpp).
    NaN in out gives NaN (which fails any <= test)."""
    torch = _torch()
    o = out.double().cpu()
    r = ref.double().cpu()
    num = (o - r).norm(dim=-1)
    den = r.norm(dim=-1)
    zero_ref = torch.where(num == 0, 0.0, math.inf)  # NaN there: inf, which fails too
    return torch.where(den > 0, num / den.where(den > 0, den.new_ones(())), zero_ref)


def check_bf16(out, ref, tol=5e-3):
    """SPEC §4 for bf16 output: raises AssertionError naming the worst (token, head) if any exceeds tol."""
    torch = _torch()
    err = rel_l2_per_head(out, ref)
    bad = ~(err <= tol)  # NaN counts as bad
    if bool(bad.any()):
        t, h = [int(i) for i in torch.nonzero(bad)[0]]
        raise AssertionError(f"bf16 output off the reference at token {t} head {h}: rel L2 {float(err[t, h]):.3g} "
                             f"> {tol} ({int(bad.sum())} of {bad.numel()} rows)")
    return float(err.max()) if err.numel() else 0.0


# ---------------------------------------------------------------------------------------------- random cases

def cos_sin_table(max_pos, theta=10000.0):
    """fp32 [max_pos, 64]: cos of 32 angles, then their sin (§3.1), angles pos * theta^(-i/32)."""
    torch = _torch()
    pos = torch.arange(max_pos, dtype=torch.float64)[:, None]
    ang = pos * theta ** (-torch.arange(32, dtype=torch.float64) / 32)
    return torch.cat([ang.cos(), ang.sin()], dim=1).float()


def random_case(tokens, heads, swa_format, comp_format, window=128, topk=512, swa_page=64, comp_page=64,
                seed=0, max_pos=4096, swa_pages=8, comp_pages=16, with_sink=True):
    """A random decode step on the CPU (same seed: same case on every process). comp_format None or topk 0:
    an SWA-only layer. Slots: random, ~5% -1, duplicates possible, partial lengths (token 0 full).
    page_stride is 64 bytes over P * (D + S), so that a kernel deriving it from P fails."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)

    def cache(fmt, page, pages):
        D, S = RECORD_BYTES[fmt]
        c = PagedCache(fmt, page, pages, page_stride=page * (D + S) + 64)
        n = c.slots
        c.write(torch.arange(n, dtype=torch.int32), (torch.randn(n, 512, generator=g) * 2).to(torch.bfloat16))
        return c

    def lists(width, n_slots):
        slots = torch.randint(0, n_slots, (tokens, width), generator=g, dtype=torch.int32)
        slots[torch.rand(tokens, width, generator=g) < 0.05] = -1
        lens = torch.randint(width // 2, width + 1, (tokens,), generator=g, dtype=torch.int32)
        lens[0] = width
        return slots, lens

    case = dict(tokens=tokens, heads=heads, window=window, max_pos=max_pos)
    case["swa_cache"] = cache(swa_format, swa_page, swa_pages)
    case["swa_slots"], case["swa_lens"] = lists(window, case["swa_cache"].slots)
    if comp_format and topk > 0:
        case["comp_cache"] = cache(comp_format, comp_page, comp_pages)
        case["comp_slots"], case["comp_lens"] = lists(topk, case["comp_cache"].slots)
        case["topk"] = topk
    else:
        case["comp_cache"] = case["comp_slots"] = case["comp_lens"] = None
        case["topk"] = 0
    case["q"] = torch.randn(tokens, heads, 512, generator=g).to(torch.bfloat16)
    case["positions"] = torch.randint(0, max_pos, (tokens,), generator=g, dtype=torch.int64)
    case["cos_sin"] = cos_sin_table(max_pos)
    case["sink"] = (torch.randn(heads, generator=g) * 2).float() if with_sink else None
    return case


def case_to(case, device):
    """The case with every tensor and cache on `device` (a new dict)."""
    out = {}
    for k, v in case.items():
        out[k] = v.to(device) if hasattr(v, "to") and not isinstance(v, (int, float, str)) else v
    return out


def reference_of_case(case, h0=0, h1=None):
    """float64 [T, h1 - h0, 512]: the reference of heads h0..h1-1 of a case (§3.2 steps 1-7)."""
    h1 = case["heads"] if h1 is None else h1
    sink = None if case["sink"] is None else case["sink"][h0:h1]
    return reference_step(case["q"][:, h0:h1], case["positions"], case["cos_sin"], case["swa_slots"],
                          case["swa_lens"], case["swa_cache"], case["comp_slots"], case["comp_lens"],
                          case["comp_cache"], sink=sink)


def forward_kwargs(case, q, out, sink):
    """swapjit.Layer.forward keyword arguments for a case already on the GPU (case_to), with plain q
    [T, H, 512] bf16 (contiguous), bf16 output out [T, H, 512] and sink [H] or None."""
    T, H = q.shape[0], q.shape[1]
    kw = dict(num_tokens=T, q=q, q_token_stride=H * 512, positions=case["positions"], cos_sin=case["cos_sin"],
              max_pos=case["max_pos"], swa_slots=case["swa_slots"], swa_lens=case["swa_lens"],
              swa_width=case["window"], swa_cache=case["swa_cache"].ref(), sink=sink, out_bf16=out,
              out_token_stride=H * 512)
    if case["comp_cache"] is not None:
        kw.update(comp_slots=case["comp_slots"], comp_lens=case["comp_lens"], comp_width=case["topk"],
                  comp_cache=case["comp_cache"].ref())
    return kw
