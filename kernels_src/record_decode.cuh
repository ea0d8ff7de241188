// record_decode.cuh: KV records in both decode kernels (SPEC §2.1, §2.2): a slot's data and scale rows, their
// loads (read-only path) and the exact dequantisation of a 16-dim piece to bf16 per format, split into a load
// and a decode step so that callers issue several pieces' loads before the first decode.
// NOTE: device-only; compiled through NVRTC after the prelude (kKey, kVariant); included by decode_common.cuh.
#pragma once
#include "e2m1_prmt_tables.cuh"
#include "fp_convert.cuh"
#include "kernel_params.cuh"
#include "key_shape.cuh"

namespace swapjit {
namespace dc {

// KV records (SPEC §2.1): slot s of a cache with P slots per page, format Fmt.
template <int Fmt, int P>
struct RecordPtrs {
  const u8* data;   // [D] bytes of the slot's data row
  const u8* scale;  // [S] bytes of the slot's scale row
};

template <int Fmt, int P>
__device__ __forceinline__ RecordPtrs<Fmt, P> record_ptrs(const CacheView& c, int slot) {
  constexpr int D = record_data_bytes(Fmt);
  constexpr int S = record_scale_bytes(Fmt);
  const int page = slot / P;  // slot >= 0 here; P is a compile-time power of two
  const int off = slot % P;
  const u8* pg = c.base + static_cast<i64>(page) * c.page_stride;  // page_stride is run-time, never P-derived
  return {pg + off * D, pg + P * D + off * S};
}

__device__ __forceinline__ uint4 ld_nc_16(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ uint2 ld_nc_8(const void* p) {
  uint2 r;
  asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_nc_u8(const void* p) {
  unsigned short r;
  asm volatile("ld.global.nc.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}

// a * b on packed bf16 pairs, rounded to nearest (`mul.bf16x2` needs sm_90, as every decode key does:
// jit/compile_key.cpp). Exact wherever the callers use it: a product of <= 6 significant bits that is normal.
__device__ __forceinline__ unsigned mul_bf16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Four e4m3 codes (one 32-bit word, first dim in the low byte) times an exact power of two (as bf16x2 {s, s})
// -> two packed bf16x2 words. Each code goes e4m3 -> f16 -> f32 -> bf16 exactly (<= 4 significant bits), and
// the bf16 multiply is exact while the product is normal: for every scale byte a writer emits (>= 114, SPEC
// §2.3) and every non-zero code (>= 2^-9) it is >= 2^-22, and the bits are the fp32 product's (HOPPER_NOTES §3;
// tests/test_e2m1_prmt.cpp checks every code and writer scale byte). Why in bf16: one mul.bf16x2 a pair instead
// of two fp32 multiplies, ~2.75 SASS instructions an element instead of ~3.25 (H200 session 30 run 1: swap-AB
// -0.6 %, head-padded -0.3 to -0.5 %).
__device__ __forceinline__ void e4m3x4_scaled(unsigned w, unsigned scale2, unsigned& out01, unsigned& out23) {
  unsigned h01, h23;
  fp::e4m3x4_to_f16x2x2(w, h01, h23);
  out01 = mul_bf16x2(fp::f16x2_e4m3_to_bf16x2(h01), scale2);
  out23 = mul_bf16x2(fp::f16x2_e4m3_to_bf16x2(h23), scale2);
}

// d = the bytes of a and b selected by the four nibbles of sel (prmt.b32: PTX ISA, default mode).
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// The e4m3 scale byte as bf16x2 {s, s}: exact (3 mantissa bits), NaN stays NaN.
__device__ __forceinline__ unsigned e4m3_scale_bf16x2(unsigned char scale) {
  const unsigned b = __float_as_uint(fp::e4m3_to_float(scale)) >> 16;
  return b | (b << 16);
}
// Eight e2m1 codes (one 32-bit word, even dim in the low nibble) times an e4m3 scale (as bf16x2 {s, s})
// -> four bf16x2: the codes' values by byte-permute table lookups, then one bf16x2 multiply per pair
// (mul_bf16x2). A magnitude (3 bits) selects
// its bf16's low byte from the table {00 00 80 C0 00 40 80 C0} and its high byte from
// {00 3F 3F 3F 40 40 40 40} (0, .5, 1, 1.5, 2, 3, 4, 6); a third permute moves each code's sign bit to bit
// 15 / 31. The product e2m1 * e4m3 has <= 6 significant bits and stays normal (>= 2^-10), so the bf16
// multiply is exact: the bits of the reference's decode. Why: the fp32 path it replaced (session 7) took
// ~9 instructions per 2 dims, ~1.2 us of a 128-slot tile (32 heads, T = 16: the fp4 pairing 16.2 us
// against 15.0 for fp8); this takes ~23 per 8 dims. A NaN scale propagates; a negative zero code keeps its
// sign (mul, not fma with a +0 addend).
__device__ __forceinline__ void e2m1x8_scaled(unsigned w, unsigned scale2, unsigned (&out)[4]) {
  namespace t = e2m1_prmt;  // the tables and selectors (e2m1_prmt_tables.cuh; replayed by a host test)
  const unsigned m = w & t::kMagnitudes, mh = m >> 16;
  const unsigned l_lo = prmt(t::kLowA, t::kLowB, m), h_lo = prmt(t::kHighA, t::kHighB, m);     // codes 0..3
  const unsigned l_hi = prmt(t::kLowA, t::kLowB, mh), h_hi = prmt(t::kHighA, t::kHighB, mh);   // codes 4..7
  out[0] = prmt(l_lo, h_lo, t::kPairLow);  // [L(c0) H(c0) L(c1) H(c1)]
  out[1] = prmt(l_lo, h_lo, t::kPairHigh);
  out[2] = prmt(l_hi, h_hi, t::kPairLow);
  out[3] = prmt(l_hi, h_hi, t::kPairHigh);
  const unsigned w4 = w << 4;  // bit 7 of byte k: the sign of code 2k (w's own bit 7 of byte k: code 2k+1)
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned sign = prmt(w4, w, t::sign_selector(k)) & t::kSignBits;
    out[k] = mul_bf16x2(out[k] | sign, scale2);
  }
}

// The raw bytes of one 16-dim piece of a record, loaded but not yet decoded. Splitting load from decode
// lets a caller issue the loads of several pieces before the first decode (latency hiding); the values are
// the same either way.
struct RawPiece16 {
  uint4 a;         // v41_fp8 / v4_fp8 e4m3: 16 codes; v41_fp4: .x/.y = 16 codes; v4_fp8 RoPE: dims +0..+7
  uint4 b;         // v4_fp8 RoPE pieces only: dims +8..+15 (bf16 as stored)
  unsigned scale;  // the piece's scale byte
};

// kMayRope = false: the caller knows the piece is not a v4_fp8 RoPE piece (no .b, no run-time test).
// kScale = false: the caller loads the scale bytes itself (several pieces' at once) and sets .scale.
template <int Fmt, int P, bool kMayRope = true, bool kScale = true>
__device__ __forceinline__ RawPiece16 load_piece16(const RecordPtrs<Fmt, P>& r, int piece) {
  RawPiece16 w;
  w.b = make_uint4(0, 0, 0, 0);
  if constexpr (Fmt == kFormatV41Fp8) {
    w.a = ld_nc_16(r.data + piece * 16);       // 16 x e4m3
    if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece / 2);  // UE8M0, 32-dim tiles
  } else if constexpr (Fmt == kFormatV41Fp4) {
    const uint2 d = ld_nc_8(r.data + piece * 8);  // 16 x e2m1
    w.a = make_uint4(d.x, d.y, 0, 0);
    if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece);  // e4m3, 16-dim tiles
  } else {
    static_assert(Fmt == kFormatV4Fp8, "unknown record format");
    if (!kMayRope || piece < kNoRopeDims / 16) {  // 448 e4m3 dims, 64-dim UE8M0 tiles
      w.a = ld_nc_16(r.data + piece * 16);
      if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece / 4);
    } else {  // RoPE dims as stored bf16: bytes 448 + 32 * (piece - 28)
      const u8* src = r.data + kNoRopeDims + (piece - kNoRopeDims / 16) * 32;
      w.a = ld_nc_16(src);
      w.b = ld_nc_16(src + 16);
      w.scale = 0;
    }
  }
  return w;
}

// Decodes a loaded piece exactly to bf16 (SPEC §2.2). lo holds dims +0..+7, hi dims +8..+15, each as 4
// packed bf16x2 words (even dim in the low half), i.e. the 16-byte memory image of 8 consecutive bf16.
template <int Fmt, bool kMayRope = true>
__device__ __forceinline__ void decode_piece16(const RawPiece16& w, int piece, uint4& lo, uint4& hi) {
  if constexpr (Fmt == kFormatV41Fp4) {
    const unsigned scale2 = e4m3_scale_bf16x2(static_cast<unsigned char>(w.scale));
    unsigned a[4], b[4];
    e2m1x8_scaled(w.a.x, scale2, a);
    e2m1x8_scaled(w.a.y, scale2, b);
    lo = make_uint4(a[0], a[1], a[2], a[3]);
    hi = make_uint4(b[0], b[1], b[2], b[3]);
  } else {
    if (Fmt == kFormatV4Fp8 && kMayRope && piece >= kNoRopeDims / 16) {
      lo = w.a;
      hi = w.b;
      return;
    }
    const unsigned scale2 = fp::ue8m0_to_bf16x2(w.scale);
    e4m3x4_scaled(w.a.x, scale2, lo.x, lo.y);
    e4m3x4_scaled(w.a.y, scale2, lo.z, lo.w);
    e4m3x4_scaled(w.a.z, scale2, hi.x, hi.y);
    e4m3x4_scaled(w.a.w, scale2, hi.z, hi.w);
  }
}

}  // namespace dc
}  // namespace swapjit
