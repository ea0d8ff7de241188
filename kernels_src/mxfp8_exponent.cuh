// mxfp8_exponent.cuh: the MXFP8 output cast's block exponent (SPEC.md §3.2 step 8) without a division.
// Shared by the kernels' epilogue (decode_common.cuh write_out_chunk) and the host test that checks it against
// the division form for every fp32 amax it can take (tests/test_mxfp8_exponent.cpp).
// The rule: e = ceil(log2(fl32(amax / 448))) for amax >= 1e-4 (the epilogue floors amax there), the scale byte
// e + 127. Why not the division: `__fdiv_rn` is ~15 SASS instructions with a slow-path check (FCHK, a call) on
// the merge's per-thread latency chain, once per task in both kernels (session 21).
// Derivation: amax = m 2^E, m in [1, 2). The quotient q = amax / 448 rounds to at most 2^j exactly when
// q <= 2^j (1 + 2^-24) (the midpoint above 2^j ties to 2^j, whose significand is even), i.e. m <= 1.75 (1 + 2^-24)
// for j = E - 8; fp32 significands near 1.75 are 2^-23 apart, so that is m <= 1.75, mantissa field <= 0x600000.
// j = E - 9 never holds (m >= 1 > 0.875 (1 + 2^-24)) and j = E - 7 always does. q stays a normal number for
// every amax in [1e-4, FLT_MAX]. +inf (an infinite output) gives the division's e = 128 (scale byte 255, NaN).
// NOTE: plain C++ (host and device); no CUDA headers.
#pragma once

namespace swapjit {
namespace mxfp8 {

// `bits`: the fp32 pattern of amax, a positive value >= 1e-4 or +inf.
constexpr int block_exponent(unsigned bits) {
  return bits >= 0x7F800000u ? 128 : static_cast<int>(bits >> 23) - 135 + ((bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
}

}  // namespace mxfp8
}  // namespace swapjit
