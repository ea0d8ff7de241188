// export_pack24.cuh: the wire format of the swap-AB push merge's slices (swapab_merge.cuh): four fp32 partial
// values in three 32-bit words, each value rounded to its top 24 bits (sign, exponent, 15 mantissa bits).
// Shared by the kernel and by the host test that replays it (tests/test_export_pack24.cpp).
// Why: the merge's exchange runs at the cluster network's rate (merge_path_probe, docs/perf-notes.md session
// 9: ~1.25 us for 10 x 32 KB, 1.98 us for 10 x 64 KB; ~1.9 us from the publishing barrier to the last slice at
// 32 heads, T = 16), so only fewer bytes shorten it; 24-bit values cut them by a quarter.
// Numerics: one rounding of each unnormalised partial O_c (half away from zero in magnitude: the + 0x80 on
// the bit pattern), relative error <= 2^-16, 1/128 of the bf16 output's own rounding step (SPEC §4); -0, inf
// and NaN keep their class. Deterministic: the same partial always gives the same bytes.
// NOTE: plain C++ (host and device); no CUDA headers.
#pragma once

namespace swapjit {
namespace pack24 {

// The top 24 bits of fp32 bits x, rounded (half away from zero): the low 8 bits of the result are garbage
// for pack(), zero for what unpack() returns.
constexpr unsigned round24(unsigned x) { return x + 0x80u; }

// Four fp32 bit patterns -> three words: [a1 a2 a3 b1] [b2 b3 c1 c2] [c3 d1 d2 d3] (byte i of x = xi).
constexpr void pack(unsigned a, unsigned b, unsigned c, unsigned d, unsigned (&w)[3]) {
  a = round24(a);
  b = round24(b);
  c = round24(c);
  d = round24(d);
  w[0] = (a >> 8) | (b & 0x0000FF00u) << 16;
  w[1] = (b >> 16) | (c & 0x00FFFF00u) << 8;
  w[2] = (c >> 24) | (d & 0xFFFFFF00u);
}

// The inverse: the four rounded fp32 bit patterns (low byte zero).
constexpr void unpack(const unsigned (&w)[3], unsigned (&x)[4]) {
  x[0] = w[0] << 8;
  x[1] = (w[0] >> 16 & 0x0000FF00u) | w[1] << 16;
  x[2] = (w[1] >> 8 & 0x00FFFF00u) | w[2] << 24;
  x[3] = w[2] & 0xFFFFFF00u;
}

}  // namespace pack24
}  // namespace swapjit
