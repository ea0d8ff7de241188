// export_pack24.cuh: the packed O^T export of the swap-AB push merge (swapab_tile_wgmma.cuh writes it,
// swapab_merge.cuh sends and reads it): each fp32 partial value rounded to its top 24 bits and stored as a
// 16-bit high half and an 8-bit low byte. Shared by the kernel and by the host test that replays it
// (tests/test_export_pack24.cpp).
// Why: the merge's exchange runs at the cluster network's rate (merge_path_probe, docs/perf-notes.md session
// 9: ~1.25 us for 10 x 32 KB, 1.98 us for 10 x 64 KB; ~1.9 us from the publishing barrier to the last slice at
// 32 heads, T = 16), so only fewer bytes shorten it: 3 B a value instead of 4. The split into a 16-bit and an
// 8-bit part lets the export store both with stmatrix.trans straight from the accumulator fragments (a pass
// that repacked the fp32 export in smem cost more than the network saved: session 10).
// Layout: unit (head h, 16-dim block b) of 48 B at unit_index(h, b) * 48: bytes [0, 32) the high halves of
// dims 16b + 0..15 (2 B each, dim order); bytes [32, 48) eight 16-bit elements, element r = [low byte of dim
// 16b + r, low byte of dim 16b + r + 8] (the accumulator fragment holds rows r and r + 8 in one thread).
// Numerics: x + 0x80 on the bit pattern, then its top 24 bits (half away from zero in magnitude: <= 2^-16
// relative); the unpacked value's bits 0..7 repeat the low byte instead of zeros (one prmt a value; < 3 x 2^-16
// relative in all, under 1/40 of the bf16 output's own rounding step, SPEC §4). -0, inf and NaN keep their
// class. Deterministic.
// NOTE: plain C++ (host and device); no CUDA headers.
#pragma once

namespace swapjit {
namespace pack24 {

constexpr int kUnitBytes = 48;  // one head's 16 dims
constexpr int kLoOffset = 32;   // the low bytes' 8 elements within a unit

// Units of a head in XOR-swizzled order: the 8 heads of one stmatrix (same block) land 48 * (b ^ (h & 7))
// mod 128 apart, 8 different 16-B bank groups; aligned groups of 8 units stay in place, so every merge
// slice (a multiple of 8 units) is one contiguous byte range.
constexpr int unit_index(int h, int b) { return h * 32 + (b ^ (h & 7)); }

constexpr unsigned round24(unsigned x) { return x + 0x80u; }

// prmt.b32 selectors (default mode: byte i of the result is byte (sel >> 4i) & 7 of {b, a}, a = bytes 0-3).
constexpr unsigned kHiPair = 0x7632u;  // [a.2 a.3 b.2 b.3]: the high halves of a and b
constexpr unsigned kLoPair = 0x0051u;  // [a.1 b.1 - -]: the low bytes (bits 8..15) of a and b
constexpr unsigned kLoQuad = 0x5410u;  // [a.0 a.1 b.0 b.1]: two low-byte pairs in one word
// A value from a high-half word a = [hi(2k), hi(2k + 1)] and an element word b = [e(2k), e(2k + 1)] of the
// unit's dims 8 half + 2k (+ 1): [lo, lo, hi] (byte 4 + half of b is dim 2k's low byte, 6 + half dim 2k + 1's).
constexpr unsigned kDimSel[2][2] = {{0x1044u, 0x3266u}, {0x1055u, 0x3277u}};

}  // namespace pack24
}  // namespace swapjit
