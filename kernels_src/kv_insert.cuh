// kv_insert.cuh: the KV cache writer of SPEC.md §2.3 for the key's record format (kKey.swa_format) and
// page size (kKey.swa_page). One CTA per input row, 64 threads, 8 dims per thread. Optional RoPE at
// `positions` (SPEC §3.2 step 2 form: fp32 fma, then bf16 RN) before quantisation. Slot < 0 skips the row.
// The bytes written must equal reference/paged_cache.cpp's encode_record exactly.
// Non-finite tiles (any NaN or +-Inf among the tile's inputs) [choice, mirrored by the host encoder]:
//   v41_fp8 / v4_fp8: scale byte 255 (NaN) and every data byte of the tile 0x7F (e4m3 NaN);
//   v41_fp4: scale byte 0x7F (NaN) and every code of the tile 0 (SPEC leaves them unspecified).
// The v4_fp8 RoPE dims are copied as bf16 whatever their values; its scale padding byte 7 is written 0.
#pragma once
#include "fp_convert.cuh"
#include "kv_insert_traits.cuh"

namespace swapjit {
namespace kv_insert_detail {

constexpr int kFmt = kKey.swa_format;
constexpr int kPage = kKey.swa_page;
constexpr int kD = record_data_bytes(kFmt);   // data-row bytes
constexpr int kS = record_scale_bytes(kFmt);  // scale-row bytes
constexpr int kTile = record_scale_tile(kFmt);
constexpr int kLanesPerTile = kTile / KvInsertTraits::kDimsPerThread;  // 2 (fp4), 4 (v41_fp8), 8 (v4_fp8)
static_assert(kFmt == kFormatV41Fp8 || kFmt == kFormatV41Fp4 || kFmt == kFormatV4Fp8, "kv_insert format");
static_assert(kPage > 0 && (kPage & (kPage - 1)) == 0, "page size is a power of two");

// Max over the lanes of one scale tile (aligned groups of kLanesPerTile lanes). Every lane of the warp
// takes part, so the RoPE lanes of v4_fp8 (whose values are discarded) do too.
__device__ __forceinline__ float tile_max(float v) {
#pragma unroll
  for (int o = 1; o < kLanesPerTile; o <<= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}
__device__ __forceinline__ unsigned tile_or(unsigned v) {
#pragma unroll
  for (int o = 1; o < kLanesPerTile; o <<= 1) v |= __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Loads this thread's 8 bf16 dims: the raw 16-byte image (bf16 pairs, even dim low) and the values as
// floats. A 16-B load when the address allows it (row_stride is a run-time element count, so alignment
// is not guaranteed).
__device__ __forceinline__ void load_dims(const u16* src /* bf16 [8] */, uint4& raw, float (&x)[8]) {
  if ((reinterpret_cast<unsigned long long>(src) & 15ull) == 0) {
    raw = *reinterpret_cast<const uint4*>(src);
  } else {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = static_cast<unsigned>(src[2 * i]) | (static_cast<unsigned>(src[2 * i + 1]) << 16);
    raw = make_uint4(w[0], w[1], w[2], w[3]);
  }
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = fp::bf16_to_float(static_cast<unsigned short>(w[i] & 0xFFFFu));
    x[2 * i + 1] = fp::bf16_to_float(static_cast<unsigned short>(w[i] >> 16));
  }
}

// RoPE on 4 GPT-J pairs (dims 448 + 2i, 449 + 2i for i = first_pair..first_pair+3), SPEC §3.2 step 2.
// NOTE: __fmul_rn / __fmaf_rn pin the rounding points so the compiler cannot contract differently from
// the host reference.
__device__ __forceinline__ void apply_rope(float (&x)[8], const float* cs /* fp32 [64] of this position */,
                                           int first_pair) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float c = cs[first_pair + j];
    const float s = cs[kRopePairs + first_pair + j];
    const float x0 = x[2 * j], x1 = x[2 * j + 1];
    const float y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
    const float y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
    x[2 * j] = fp::bf16_to_float(fp::float_to_bf16_rn(y0));
    x[2 * j + 1] = fp::bf16_to_float(fp::float_to_bf16_rn(y1));
  }
}

// v41_fp8 / v4_fp8 no-RoPE tiles: sf = max(fl32(amax / 448), 1e-4), e = ceil(log2 sf), data = e4m3(x / 2^e).
// Every lane of the warp calls this (the tile reduction shuffles); a null pointer skips that store.
__device__ __forceinline__ void encode_fp8_dims(const float (&x)[8], u8* data /* [8] or null */,
                                                u8* scale_byte /* [1] or null */) {
  float amax = 0.0f;
  unsigned bad = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    amax = fmaxf(amax, fabsf(x[i]));
    bad |= fp::is_nonfinite(x[i]) ? 1u : 0u;
  }
  amax = tile_max(amax);
  bad = tile_or(bad);
  const float sf = fmaxf(__fdiv_rn(amax, 448.0f), 1e-4f);
  const int e = fp::ceil_log2_exponent(sf);
  const float inv = fp::exp2_int(-e);  // exact: x * 2^-e == x / 2^e
  unsigned w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const unsigned lo = fp::float2_to_e4m3x2(x[4 * i] * inv, x[4 * i + 1] * inv);
    const unsigned hi = fp::float2_to_e4m3x2(x[4 * i + 2] * inv, x[4 * i + 3] * inv);
    w[i] = bad ? 0x7F7F7F7Fu : (lo | (hi << 16));
  }
  if (data != nullptr) *reinterpret_cast<uint2*>(data) = make_uint2(w[0], w[1]);
  if (scale_byte != nullptr) *scale_byte = bad ? u8(255) : static_cast<u8>(e + 127);
}

// v41_fp4 tiles: scale = e4m3_rn(clamp(amax / 6, 2^-9, 448)); code = e2m1_rn(x / scale) (IEEE division).
__device__ __forceinline__ void encode_fp4_dims(const float (&x)[8], u8* data /* [4] */, u8* scale_byte) {
  float amax = 0.0f;
  unsigned bad = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    amax = fmaxf(amax, fabsf(x[i]));
    bad |= fp::is_nonfinite(x[i]) ? 1u : 0u;
  }
  amax = tile_max(amax);
  bad = tile_or(bad);
  const float clamped = fminf(fmaxf(__fdiv_rn(amax, 6.0f), 0.001953125f /* 2^-9 */), 448.0f);
  const unsigned char sbyte = fp::float_to_e4m3(clamped);
  const float scale = fp::e4m3_to_float(sbyte);
  unsigned packed = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) packed |= fp::float_to_e2m1(__fdiv_rn(x[i], scale)) << (4 * i);
  *reinterpret_cast<unsigned*>(data) = bad ? 0u : packed;  // even dim in the low nibble
  if (scale_byte != nullptr) *scale_byte = bad ? u8(0x7F) : static_cast<u8>(sbyte);
}

}  // namespace kv_insert_detail

__global__ void __launch_bounds__(KvInsertTraits::kThreads) kv_insert_kernel(const __grid_constant__ InsertParams p) {
  using namespace kv_insert_detail;
  // NOTE: the rows, slots and positions may come from the kernel just before (PDL): wait first. Letting
  // dependents launch at once is safe: their griddepcontrol.wait waits for this grid to complete.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");

  const int row = blockIdx.x;
  const int t = threadIdx.x;
  if (row >= p.num_rows) return;
  const i64 slot = p.slots[row];
  if (slot < 0) return;  // uniform per CTA: the whole block leaves together, no shuffle is left half-done

  float x[8];
  uint4 raw;  // the input's own bits: copied unchanged into v4_fp8 RoPE dims when no RoPE is applied,
              // so NaN payloads survive exactly as the host encoder keeps them
  load_dims(p.rows + row * p.row_stride + t * KvInsertTraits::kDimsPerThread, raw, x);
  if (p.positions != nullptr && t >= KvInsertTraits::kRopeFirstThread) {
    const i64 pos = p.positions[row];
    apply_rope(x, p.cos_sin + pos * (2 * kRopePairs), (t - KvInsertTraits::kRopeFirstThread) * 4);
    raw.x = fp::pack_bf16x2_rn(x[0], x[1]);  // exact: x holds bf16 values after apply_rope
    raw.y = fp::pack_bf16x2_rn(x[2], x[3]);
    raw.z = fp::pack_bf16x2_rn(x[4], x[5]);
    raw.w = fp::pack_bf16x2_rn(x[6], x[7]);
  }

  u8* page_base = const_cast<u8*>(p.cache.base) + (slot / kPage) * p.cache.page_stride;
  const int off = static_cast<int>(slot % kPage);
  u8* data = page_base + off * kD;                 // [kD] this slot's data row
  u8* scale = page_base + kPage * kD + off * kS;   // [kS] this slot's scale row
  const bool tile_leader = (t % kLanesPerTile) == 0;
  u8* my_scale = tile_leader ? scale + t / kLanesPerTile : nullptr;

  if constexpr (kFmt == kFormatV41Fp4) {
    encode_fp4_dims(x, data + t * 4, my_scale);
  } else if constexpr (kFmt == kFormatV41Fp8) {
    encode_fp8_dims(x, data + t * 8, my_scale);
  } else {  // v4_fp8: dims 0..447 as fp8 tiles of 64, dims 448..511 copied as bf16 at byte 448
    const bool rope_lane = t >= KvInsertTraits::kRopeFirstThread;
    // All lanes run the tile reduction together; the RoPE lanes form their own 8-lane group and store
    // nothing from it.
    encode_fp8_dims(x, rope_lane ? nullptr : data + t * 8, rope_lane ? nullptr : my_scale);
    if (rope_lane) {
      *reinterpret_cast<uint4*>(data + kNoRopeDims + (t - KvInsertTraits::kRopeFirstThread) * 16) = raw;
      if (t == KvInsertTraits::kRopeFirstThread) scale[kS - 1] = 0;  // padding byte 7
    }
  }
}

}  // namespace swapjit
