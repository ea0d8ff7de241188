// fp_convert.cuh: the device-side number conversions every kernel family shares (SPEC.md §2.2, §2.3,
// §3.2). Decoders are exact (each record format dequantises exactly to bf16); encoders follow
// `cvt.rn.satfinite` semantics bit for bit, so that kv_insert and the decode epilogue write the same bytes
// as the host codecs in reference/paged_cache.cpp. Facts used here are in HOPPER_NOTES.md §3.
// NOTE: device-only (inline PTX); compiled through NVRTC with the prelude of the conventions. No
// <cstdint> here: plain unsigned types keep it independent of the host/NVRTC integer headers.
#pragma once

namespace swapjit {
namespace fp {

// ---------------------------------------------------------------------------------------------------
// bf16 <-> fp32. bf16 values travel as raw 16-bit patterns (unsigned short), packed pairs as unsigned int
// with the EVEN dim in the LOW half (little-endian memory order).

__device__ __forceinline__ float bf16_to_float(unsigned short b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);  // exact by definition of bf16
}

// Round to nearest even (NaN stays NaN, overflow goes to Inf), as SPEC §3.2 step 2 / step 8 ask.
__device__ __forceinline__ unsigned short float_to_bf16_rn(float x) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}

// Two floats -> packed bf16x2, `lo` in the low half. NOTE: cvt.rn.bf16x2.f32 d, a, b puts a in the UPPER
// half, so the operands are (hi, lo).
__device__ __forceinline__ unsigned pack_bf16x2_rn(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// ---------------------------------------------------------------------------------------------------
// E4M3 (OCP e4m3fn) decode. `v` holds two codes: the low byte is the first (even) element.

// Two e4m3 -> two floats, exact (every e4m3 value is a normal f16; 0x7F/0xFF decode to NaN).
// f16x2 -> two floats (exact).
__device__ __forceinline__ void f16x2_to_float2(unsigned h2, float& lo, float& hi) {
  asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"(static_cast<unsigned short>(h2 & 0xFFFFu)));
  asm("cvt.f32.f16 %0, %1;" : "=f"(hi) : "h"(static_cast<unsigned short>(h2 >> 16)));
}
__device__ __forceinline__ void e4m3x2_to_float2(unsigned short v, float& lo, float& hi) {
  unsigned h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(v));
  f16x2_to_float2(h2, lo, hi);
}

// Four e4m3 (one 32-bit word, first in the low byte) -> two f16x2 (codes 0, 1 and 2, 3). The word's halves go
// to the two cvt's as b16 registers of one mov (ptxas can read a half in place instead of shifting it down).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(unsigned w, unsigned& h01, unsigned& h23) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(h01), "=r"(h23)
      : "r"(w));
}
// f16x2 -> bf16x2, exact for the f16 of an e4m3 (<= 4 significant bits): through fp32.
__device__ __forceinline__ unsigned f16x2_e4m3_to_bf16x2(unsigned h2) {
  float lo, hi;
  f16x2_to_float2(h2, lo, hi);
  return pack_bf16x2_rn(lo, hi);
}

__device__ __forceinline__ float e4m3_to_float(unsigned char v) {
  float lo, hi;
  e4m3x2_to_float2(static_cast<unsigned short>(v), lo, hi);
  return lo;
}

// ---------------------------------------------------------------------------------------------------
// E2M1 decode (bit 3 sign, bits 0..2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}). Built from fp32 bits rather
// than a table in memory: a dynamically indexed local array would live in local memory.
//   mag 1      -> 0.5 = 0x3F000000
//   mag 2..7   -> exponent field (mag >> 1) + 126, mantissa top bit (mag & 1): 1, 1.5, 2, 3, 4, 6
__device__ __forceinline__ float e2m1_to_float(unsigned code) {
  const unsigned mag = code & 7u;
  unsigned bits = mag == 0u ? 0u
                  : mag == 1u ? 0x3F000000u
                              : (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22);
  bits |= (code & 8u) << 28;  // sign bit 3 -> bit 31 (code 8 is -0.0)
  return __uint_as_float(bits);
}

// ---------------------------------------------------------------------------------------------------
// UE8M0 decode: 2^(b - 127), exact. b = 1..254 is the fp32 exponent field itself; b = 0 is the fp32
// subnormal 2^-127 (never written by a writer, decoded anyway); b = 255 is NaN (SPEC §2.2), which the
// shift alone would turn into +Inf.
__device__ __forceinline__ float ue8m0_to_float(unsigned b) {
  b &= 0xFFu;
  const unsigned bits = b == 255u ? 0x7FFFFFFFu : b == 0u ? 0x00400000u : (b << 23);
  return __uint_as_float(bits);
}
// The same as bf16x2 {s, s}: the fp32 pattern's high half (b = 0 is the bf16 subnormal 0x0040, 255 NaN 0x7FFF).
__device__ __forceinline__ unsigned ue8m0_to_bf16x2(unsigned b) {
  return (__float_as_uint(ue8m0_to_float(b)) >> 16) * 0x10001u;
}

// ---------------------------------------------------------------------------------------------------
// E4M3 encode: round to nearest even, saturate to +-448 (cvt.rn.satfinite). NaN in -> NaN (0x7F) out.
// A negative value that rounds to zero keeps its sign (0x80).
// Returns two codes packed as (lo | hi << 8). NOTE: the PTX puts its FIRST float operand in the UPPER byte.
__device__ __forceinline__ unsigned short float2_to_e4m3x2(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ unsigned char float_to_e4m3(float x) {
  return static_cast<unsigned char>(float2_to_e4m3x2(x, 0.0f) & 0xFFu);
}

// ---------------------------------------------------------------------------------------------------
// E2M1 encode, emulated exactly (Hopper has no e2m1 cvt): nearest of {0, .5, 1, 1.5, 2, 3, 4, 6}, ties
// to the even code (the one with mantissa bit 0), saturating at 6. Decision points on |x|:
//   0.25 tie -> 0 (code 0)   0.75 tie -> 1 (code 2)   1.25 tie -> 1 (code 2)   1.75 tie -> 2 (code 4)
//   2.5  tie -> 2 (code 4)   3.5  tie -> 4 (code 6)   5    tie -> 4 (code 6)   > 5 -> 6 (code 7)
// The sign is the input's sign bit, so a negative value that rounds to zero gives code 8, as
// cvt.rn.satfinite would. NaN input: codes are unspecified by SPEC (the tile's scale is NaN); this gives
// 7 or 15.
__device__ __forceinline__ unsigned float_to_e2m1(float x) {
  const float a = fabsf(x);
  unsigned mag = a <= 0.25f  ? 0u
                 : a < 0.75f ? 1u
                 : a <= 1.25f ? 2u
                 : a < 1.75f ? 3u
                 : a <= 2.5f ? 4u
                 : a < 3.5f  ? 5u
                 : a <= 5.0f ? 6u
                             : 7u;
  return mag | ((__float_as_uint(x) >> 28) & 8u);
}

// ---------------------------------------------------------------------------------------------------
// The UE8M0 exponent rule: for a positive normal fp32 `sf`, ceil(log2(sf)) == ((bits(sf) - 1) >> 23) - 126
// (SPEC §2.3). A power of two 2^k has bits (k+127) << 23, minus one drops to exponent field k+126; any
// larger mantissa keeps field k+127. The scale byte the writers emit is this + 127.
__device__ __forceinline__ int ceil_log2_exponent(float sf) {
  return static_cast<int>((__float_as_uint(sf) - 1u) >> 23) - 126;
}

// 2^e as fp32, exact for e in [-126, 127] (the writers use e in [-13, 120]).
__device__ __forceinline__ float exp2_int(int e) {
  return __uint_as_float(static_cast<unsigned>(e + 127) << 23);
}

// True for NaN or +-Inf: an exponent field of all ones.
__device__ __forceinline__ bool is_nonfinite(float x) {
  return (__float_as_uint(x) & 0x7F800000u) == 0x7F800000u;
}

}  // namespace fp
}  // namespace swapjit
