// e2m1_prmt_tables.cuh: the constants of the sm_90 fp4 decode (decode_common.cuh e2m1x8_scaled), which
// turns eight e2m1 codes into four bf16x2 words with byte permutes. Plain constants, shared by the kernel
// and by the host test that replays the permutes over every code pair in every position and checks the
// exactness of the bf16 multiply that follows (tests/test_e2m1_prmt.cpp).
// `prmt.b32 d, a, b, sel` (PTX, default mode): byte i of d is byte (sel >> 4i) & 7 of the eight bytes
// {b, a} (a = bytes 0..3), and bit 3 of that selector nibble, when set, replicates the byte's sign instead:
// the decode masks the codes to their 3 magnitude bits before using them as selectors.
// NOTE: no CUDA headers and no device code in this file.
#pragma once

namespace swapjit {
namespace e2m1_prmt {

// Low and high bytes of bf16(v) for the magnitudes v = 0, 0.5, 1, 1.5 (the a word) and 2, 3, 4, 6 (b):
// 0x0000 0x3F00 0x3F80 0x3FC0 | 0x4000 0x4040 0x4080 0x40C0.
constexpr unsigned kLowA = 0xC0800000u, kLowB = 0xC0804000u;
constexpr unsigned kHighA = 0x3F3F3F00u, kHighB = 0x40404040u;
// The eight codes' magnitudes (a selector nibble's bit 3 must be 0).
constexpr unsigned kMagnitudes = 0x77777777u;
// From the low-byte word L and the high-byte word H of four codes c0..c3: [L(c0) H(c0) L(c1) H(c1)] and
// [L(c2) H(c2) L(c3) H(c3)], i.e. bf16x2 of (c0, c1) and of (c2, c3), the even code in the low half.
constexpr unsigned kPairLow = 0x5140u, kPairHigh = 0x7362u;
// Output word k (codes 2k, 2k + 1) takes its two sign bits from byte k of (w << 4) (bit 7: code 2k's bit 3)
// and byte k of w (bit 7: code 2k + 1's bit 3), into bytes 1 and 3; then kSignBits keeps bits 15 and 31.
constexpr unsigned sign_selector(int k) { return ((4u + static_cast<unsigned>(k)) << 12) | (static_cast<unsigned>(k) << 4); }
constexpr unsigned kSignBits = 0x80008000u;

}  // namespace e2m1_prmt
}  // namespace swapjit
