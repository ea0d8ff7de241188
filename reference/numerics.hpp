// numerics.hpp: the scalar conversions of SPEC.md §2 and §3.2, on the host, bit-exact: bf16 RN, OCP
// e4m3fn (RN, satfinite), e2m1 (RN ties-to-even, saturating, the sign kept on a rounded-to-zero negative),
// and the UE8M0 exponent rule. Kernels must match these bit for bit; tests check them against
// independent formulas (tests/test_numerics.cpp).
#pragma once
#include <cstdint>

namespace swapjit::ref {

// --- bf16 ---
// Round-to-nearest-even fp32 -> bf16 bits. NaN becomes a quiet NaN (0x7FC0 with the input's sign).
uint16_t bf16_from_float(float x);
float bf16_to_float(uint16_t b);
// Round-to-nearest-even fp64 -> bf16 bits in one rounding (no double rounding through fp32); used by the
// bf16 output cast of §3.2 step 8, which the reference computes from fp64 values.
uint16_t bf16_from_double(double x);
// Rounds x to the nearest bf16 value (RN) and returns it as float.
inline float bf16_round(float x) { return bf16_to_float(bf16_from_float(x)); }

// --- FP8 E4M3 (OCP e4m3fn: bias 7, max 448, 0x7F / 0xFF NaN, no infinities) ---
// cvt.rn.satfinite semantics on an exact input: round to nearest even, |x| > 448 (and +-inf) saturates to
// +-448, NaN -> 0x7F, a negative value that rounds to zero gives 0x80. Taking a double lets the output
// cast of §3.2 step 8 round from the fp64 value once (no double rounding through fp32).
uint8_t e4m3_from_double(double x);
float e4m3_to_float(uint8_t code);  // exact; NaN codes give NaN

// --- FP4 E2M1 (bit 3 sign, bits 0..2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}) ---
// RN ties to even (ties go to the even index), saturating at +-6, sign kept on negative zero (code 8).
// NaN input: the code is unspecified by SPEC.md (the tile's scale is NaN); we return 0x7.
uint8_t e2m1_from_float(float x);
float e2m1_to_float(uint8_t code);  // code & 0xF

// --- UE8M0 ---
// ceil(log2(sf)) for a positive normal fp32 sf, via the exact bit trick of SPEC.md §2.3:
// ((bits(sf) - 1) >> 23) - 126.
int ceil_log2_bits(float sf);
// Exact 2^e as double / float (e within the range of the type).
double exp2_int(int e);
// UE8M0 byte b decodes to 2^(b - 127); 255 is NaN.
double ue8m0_to_double(uint8_t b);

uint32_t float_bits(float x);
float float_from_bits(uint32_t b);

}  // namespace swapjit::ref
