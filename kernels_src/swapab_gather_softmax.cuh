// swapab_gather_softmax.cuh: two per-tile steps of the swap-AB kernel (swapab_decode.cuh) outside the GEMMs:
// the gather of a tile's records into the bf16 KV tile in smem (the tiles whose S^T reads its A operand from
// smem: 96- and 128-row tiles, and every tile of the mma variant; 64-row wgmma tiles gather in
// swapab_gather_scores.cuh), and the per-head softmax over the tile's raw scores.
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include "swapab_shape.cuh"

namespace swapjit {
namespace swapab {

// Gathers and dequantises the tile's records into the bf16 KV tile; unused entries give zero rows.
// Work item = (slot j, 16-dim piece). A warp's item covers the same 16 pieces (256 B) of two records
// whose rows differ in bit 0 (lanes 8q..8q+3 the even row, 8q+4..8q+7 the odd one), item i the pair
// w + 16 (i / 2) of warp w and pieces 0..15 (even i) or 16..31 (odd i). Why this shape:
//   - a 16-B smem store is served a quarter-warp at a time; with one record per warp item (lane = piece),
//     the 8 lanes of a quarter wrote 4 swizzled 16-B positions twice (2-way conflicts); two rows of
//     opposite parity put them on all 8 positions;
//   - a thread's rows all have the same row & 7, so its two store addresses (lo and hi chunk) are one
//     pair of registers plus compile-time offsets: no per-item address arithmetic after the loads land.
// A thread issues all its loads (4, 6 or 8 items) before decoding the first, so their latencies overlap;
// unused entries load nothing and store zeros. `between` runs once the loads are issued, before the first
// decode: the caller's own work (Q's RoPE) overlaps the records' latency.
// Rows >= RowsA (a rebalanced SWA CTA's compressed rows 64..) are records of format FmtB in cache_b.
template <int Fmt, int P, int NS, int RowsA, int FmtB, int PB, class Between>
__device__ __forceinline__ void gather_tile(const CacheView& cache, const CacheView& cache_b,
                                            const int* sid /* smem [NS] */,
                                            unsigned char* kv /* smem bf16 [NS][512], swizzled */,
                                            Between between) {
  static_assert(RowsA % 32 == 0 && RowsA <= NS, "formats change at a whole item pair (32 rows)");
  constexpr int kItems = NS * 32 / kSwapabThreads;  // 4, 6 or 8 per thread
  static_assert(kItems % 2 == 0 && kSwapabThreads == 512, "items in pairs of piece halves; 16 warps");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = (lane >> 2) & 1;                        // row parity within the pair
  const int pb = ((lane >> 3) << 2) | (lane & 3);         // piece 0..15 (+ 16 for odd items)
  const int row0 = 2 * warp + sub;                        // item i: row row0 + 32 (i / 2)
  // Chunk 2 pb (+1) of row row0: the block (2 pb) / 8 = pb / 4 and the swizzled 16-B position; odd items
  // add 4 blocks (dims + 256), item pairs 32 rows.
  const unsigned kv_base = dc::smem_addr(kv);
  const unsigned st_lo = kv_chunk_addr(kv_base, row0, 2 * pb), st_hi = kv_chunk_addr(kv_base, row0, 2 * pb + 1);
  constexpr unsigned kOddItem = 4 * kNSA * 128, kPairRows = 32 * 128;
  // A thread's item pair 2 r, 2 r + 1 is one row (pieces pb and pb + 16): one record_ptrs and one branch a
  // row. Per piece, the 64-bit record addressing (~22 SASS instructions) ran twice a row ahead of the loads
  // (the 32-head key's gather 1,065 -> 932 instructions; H200 session 30 run 1: swap-AB 0.96-0.98 at T >= 4).
  constexpr int kRows = kItems / 2;
  dc::RawPiece16 raw[kItems];
  unsigned used = 0;  // bit r: row r has a record
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int slot = sid[row0 + 32 * r];
    if (slot >= 0) {
      if (32 * r < RowsA) {  // compile-time after unrolling
        const dc::RecordPtrs<Fmt, P> ptrs = dc::record_ptrs<Fmt, P>(cache, slot);
        raw[2 * r] = dc::load_piece16<Fmt, P>(ptrs, pb);
        raw[2 * r + 1] = dc::load_piece16<Fmt, P>(ptrs, pb + 16);
      } else {
        const dc::RecordPtrs<FmtB, PB> ptrs = dc::record_ptrs<FmtB, PB>(cache_b, slot);
        raw[2 * r] = dc::load_piece16<FmtB, PB>(ptrs, pb);
        raw[2 * r + 1] = dc::load_piece16<FmtB, PB>(ptrs, pb + 16);
      }
      used |= 1u << r;
    }
  }
  stamp(16);  // timeline builds only: this thread's record loads issued (the issue itself can stall)
  between(Index<0>{});
  stamp(12);  // timeline builds only: Q's RoPE done, the records' loads still in flight
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // One branch a row (both its items): also a scheduling boundary. Branch-free, ptxas interleaved all the
    // decodes and the 8-item fp4 decode of the 8-head key spilled; one a piece, the branches (BRA, BSSY, BSYNC,
    // the test) were ~10 % of the gather's executed instructions (ncu, session 30 run 4). An unused row stores
    // zeros on its own path, so the decoded path does not zero its registers first.
    if (used & (1u << r)) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * r + h;
        uint4 lo, hi;
        if (32 * r < RowsA) {
          dc::decode_piece16<Fmt>(raw[i], pb + 16 * h, lo, hi);
        } else {
          dc::decode_piece16<FmtB>(raw[i], pb + 16 * h, lo, hi);
        }
        store_chunk_pair(st_lo + h * kOddItem + r * kPairRows, st_hi + h * kOddItem + r * kPairRows, lo, hi);
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 z = make_uint4(0, 0, 0, 0);
        store_chunk_pair(st_lo + h * kOddItem + r * kPairRows, st_hi + h * kOddItem + r * kPairRows, z, z);
      }
    }
    // Timeline builds only: the first row's records landed and were stored. Against stamp 13 (the last row):
    // whether the gather waits for every load alike or for a few slow ones.
    if (r == 0) stamp(17);
  }
  stamp(13);  // this thread's part of the tile decoded and stored
  stamp_warp();  // timeline builds only: this warp's part stored (the barrier's spread: stamp_warp_spread)
}

// The max of a head's kTPH values. A whole warp per head (kTPH = 32: 8 and 16 heads): one redux.sync on
// order-preserving integer keys instead of five dependent shuffles on the softmax's chain (session 9: the
// swap-AB bench 0.996 compressed, 0.986 SWA-only at 16 heads; H200, docs/perf-notes.md). The key flips the
// magnitude bits of negative floats, so signed integer order is float order (-inf lowest). A NaN score maps
// above +inf (sign bit clear) or below -inf (set), where fmaxf would have skipped it: that tile's outputs are
// NaN either way (exp of NaN).
__device__ __forceinline__ float head_max(float m) {
  if constexpr (kTPH == 32) {
    const int b = __float_as_int(m);
    const int key = b ^ ((b >> 31) & 0x7FFFFFFF);
    int r;
    asm volatile("redux.sync.max.s32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(key));
    return __int_as_float(r ^ ((r >> 31) & 0x7FFFFFFF));
  } else {
#pragma unroll
    for (int o = kTPH / 2; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    return m;
  }
}

// Per-head softmax over the tile's NS slots, in base 2 (z = zscale <q, k>, zscale = sm_scale log2 e): m_c = max,
// p = exp2(z - m_c) split into bf16 hi + lo, L_c = sum p (fp32, fixed order). kTPH consecutive threads of one
// warp serve one head; a thread takes pairs of adjacent slots (pair sub, sub + kTPH, ...; a 96-slot tile at 16
// heads leaves the second pair of half the threads past the tile), so the scores load as float2, hi and lo
// convert as bf16x2 and store as one 32-bit word each. Branch-free: an unused slot's score is -inf and
// exp2(-inf - m) = 0 exactly.
// Why: this phase is issue-bound (every warp runs it; at 32 heads ~470 instructions a warp, ~1 us for 16
// warps on 4 schedulers with one slot per step and a branch around each exp; swapjit timeline, session 6).
template <int NS>
__device__ __forceinline__ void softmax_tile(const int* sid, const float* s, float zscale, unsigned char* p_hi,
                                             unsigned char* p_lo, float* ml /* smem fp32 [2][kH] */) {
  constexpr int kPairs = NS / 2;
  constexpr int kPer = (kPairs + kTPH - 1) / kTPH;  // slot pairs per thread
  static_assert(NS % 2 == 0 && NS <= kNSA, "whole slot pairs, within the allocated rows");
  if (threadIdx.x >= kH * kTPH) return;  // whole warps: kH * kTPH is a multiple of 32
  const int h = threadIdx.x / kTPH, sub = threadIdx.x % kTPH;
  float2 z[kPer];
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    const int j = 2 * (sub + q * kTPH);
    z[q] = make_float2(kNegInf, kNegInf);
    if (kPairs % kTPH != 0 && j >= NS) continue;  // past the tile (compile-time true when pairs divide)
    if constexpr (kWgmma) {  // the K parts of scores_wgmma, added in part order, then scaled and masked
      constexpr int kRow = swapab_score_row(NS), kParts = 4 / score_mtiles(NS);
      const int2 id = *reinterpret_cast<const int2*>(sid + j);
      float2 acc = *reinterpret_cast<const float2*>(s + h * kRow + j);
#pragma unroll
      for (int part = 1; part < kParts; ++part) {
        const float2 v = *reinterpret_cast<const float2*>(s + (part * kH + h) * kRow + j);
        acc.x += v.x;
        acc.y += v.y;
      }
      z[q] = make_float2(id.x >= 0 ? acc.x * zscale : kNegInf, id.y >= 0 ? acc.y * zscale : kNegInf);
    } else {
      z[q] = *reinterpret_cast<const float2*>(s + h * kNSA + j);  // scaled and masked by scores()
    }
  }
  float m = kNegInf;
#pragma unroll
  for (int q = 0; q < kPer; ++q) m = fmaxf(m, fmaxf(z[q].x, z[q].y));
  m = head_max(m);
  const float m_use = m == kNegInf ? 0.0f : m;  // an empty tile: every z is -inf, no -inf - -inf
  float l = 0.0f;
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    const int j = 2 * (sub + q * kTPH);
    const float px = exp2f(z[q].x - m_use), py = exp2f(z[q].y - m_use);
    const unsigned hi = fp::pack_bf16x2_rn(px, py);  // slot j in the low half
    const unsigned lo = fp::pack_bf16x2_rn(px - __uint_as_float(hi << 16), py - __uint_as_float(hi & 0xFFFF0000u));
    if (kPairs % kTPH == 0 || j < NS) {
      const int byte = p_byte(h, j);  // 4-B aligned: j is even
      *reinterpret_cast<unsigned*>(p_hi + byte) = hi;
      *reinterpret_cast<unsigned*>(p_lo + byte) = lo;
    }
    l += px + py;
  }
#pragma unroll
  for (int o = kTPH / 2; o >= 1; o >>= 1) l += __shfl_xor_sync(0xFFFFFFFFu, l, o);
  if (sub == 0) {
    ml[h] = m;  // -inf for an empty tile
    ml[kH + h] = l;
  }
}

}  // namespace swapab
}  // namespace swapjit
