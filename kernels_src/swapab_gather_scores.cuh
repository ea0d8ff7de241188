// swapab_gather_scores.cuh: the wgmma variant's gather fused with S^T = KV · Q^T, the KV tile's A operand
// taken from registers (the RS form of wgmma, HOPPER_NOTES §1.1) instead of from the smem tile.
// Why: with A in smem, S^T read the whole bf16 tile (64-128 KB) through the async proxy after the gather's
// fence and CTA barrier (gather stored -> S^T retired ~0.9 us at 8 heads T = 1, swapjit timeline). Here each
// thread decodes exactly the A fragments its warpgroup's wgmmas need, and S^T reads only Q (N x 16 x 2 B a
// wgmma) from smem. The tile is still stored to smem: O^T reads it (MN-major A) after the softmax.
// It serves 64-row tiles only (one m tile, K in 4 parts: the wide tiling, SWA-only layers); the form for 96-
// and 128-row tiles measured slower (docs/experiments/swapab-rs-scores-all-tiles.patch, perf-notes session 20).
// The contraction over the 512 dims does not depend on their order, so the dims are permuted (the same way
// for the tile's A fragments and for Q's smem rows, the B operand) such that a thread's fragments are whole
// 16-dim record pieces: per k16 step a thread holds 2 dims x 2 pairs of rows r and r + 8 (a[0..3], wgmma.cuh
// mma_bf16_rs), and its piece i of a row fills four consecutive steps. Logical (step S, column kk) <->
// physical dim: see q_store_permuted.
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant (sm_90a only).
#pragma once
#include "swapab_shape.cuh"
#include "swapab_tile_wgmma.cuh"
#include "wgmma.cuh"

namespace swapjit {
namespace swapab {

// Warpgroup g takes K part g of the tile's one m64 tile (as the smem form did): kPP = 8 pieces of 16 dims
// (8 k16 steps) a part. Thread (warp w of the warpgroup, lane 4 q + c) owns rows 16 w + q and + 8, and of each
// the pieces part * kPP + 4 i + c (i = 0, 1): lanes c = 0..3 read 64 consecutive record bytes, and a
// quarter-warp's 16-B stores of the decoded pieces fall on 8 distinct swizzled positions (chunk 2 c (+1)
// against rows of both parities). Piece i's words k = 0..7 (dims 2k, 2k + 1) are the pairs of local step
// 4 i + k / 2, register a[2 (k & 1) + row half].
constexpr int kRegPP = 8;

// The scale bytes of one row that a thread's pieces use (part kPP .. + kPP - 1: kBytes consecutive bytes), in
// one load instead of one a piece (fewer load instructions; no effect in the timeline, session 20 run 3).
// Local piece 4 i + c uses byte kFirst(i) + 16 c / tile of word kFirst(i) / 4 (the word is a constant:
// 16 c / tile < 4 - kFirst(i) % 4 for every format).
template <int Fmt, int kPP>
struct RowScales {
  static constexpr int kTile = record_scale_tile(Fmt), kBytes = kPP * 16 / kTile;
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8, "a row's scale bytes in one load");
  uint2 v;
  __device__ __forceinline__ void load(const unsigned char* scale_row, int part) {
    const unsigned char* src = scale_row + part * kBytes;
    if constexpr (kBytes == 8) {
      v = dc::ld_nc_8(src);
    } else if constexpr (kBytes == 4) {
      unsigned d;
      asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(d) : "l"(src));
      v = make_uint2(d, 0);
    } else {
      unsigned short d;
      asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(d) : "l"(src));
      v = make_uint2(d, 0);
    }
  }
  template <int I>
  __device__ __forceinline__ unsigned byte(int c) const {
    constexpr int kFirst = 64 * I / kTile;
    const unsigned w = kFirst / 4 == 0 ? v.x : v.y;
    return (w >> (8 * (kFirst % 4 + 16 * c / kTile))) & 0xFFu;
  }
};

// A thread's pieces of one row (data only) and the row's scale bytes for them. Only a thread's last piece of
// a row can be a v4_fp8 RoPE piece (dims 448..511: part kParts - 1). A function template: as a generic lambda
// (auto format tags, the pieces by array reference) it crashed NVRTC (SIGSEGV in nvrtcCompileProgram,
// session 20).
template <int Fmt, int P, int kPP, int kPieces>
__device__ __forceinline__ void load_row(const CacheView& cv, int slot, int part, int c,
                                         dc::RawPiece16 (&r)[kPieces], RowScales<Fmt, kPP>& sc) {
  const dc::RecordPtrs<Fmt, P> ptrs = dc::record_ptrs<Fmt, P>(cv, slot);
  static_for<0, kPieces>([&](auto ii) {
    constexpr int i = decltype(ii)::value;
    r[i] = dc::load_piece16<Fmt, P, i == kPieces - 1, false>(ptrs, part * kPP + 4 * i + c);
  });
  sc.load(ptrs.scale, part);
}

// Q's 8-dim chunk c of head h (physical dims 8c .. 8c + 7, words k' = dims 8c + 2k', + 1) into the permuted
// K-major B rows: physical piece P = c / 2 = part kPP + 4 i + cc, word k = 4 (c & 1) + k' -> global step
// S = part kPP + 4 i + k / 2, logical column 2 cc + 8 (k & 1), i.e. 16-B chunk 2 S + (k & 1), byte 4 cc.
template <int kParts>
__device__ __forceinline__ void q_store_permuted(unsigned q_base, int h, int c, const uint4& v) {
  constexpr int kPP = 32 / kParts;  // pieces (and k16 steps) a part
  const int piece = c >> 1, part = piece / kPP, pp = piece % kPP, i = pp >> 2, cc = pp & 3;
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int kq = 0; kq < 4; ++kq) {
    const int k = 4 * (c & 1) + kq, step = part * kPP + 4 * i + (k >> 1);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(q_chunk_addr(q_base, h, 2 * step + (k & 1)) + 4 * cc),
                 "r"(w[kq])
                 : "memory");
  }
}

// Gathers and dequantises this warpgroup's K quarter of a 64-row tile into A fragments, stores them to the
// smem tile as well (for O^T), then S^T over the quarter: raw partial scores s[(part kH + h)
// swapab_score_row(64) + slot], as the smem form stored them (the softmax adds the parts). Records of format Fmt
// in `cache`; slot ids in sid. `between(Index<kParts>)` runs once the loads are issued (Q's RoPE, stored
// permuted); the fence and CTA barrier after the decode order Q's stores before the wgmmas. Ends after the
// wgmmas retired and the scores are stored (no barrier).
template <int Fmt, int P, int NS, class Between>
__device__ __forceinline__ void gather_scores_wgmma(const CacheView& cache, const int* sid, unsigned char* kv,
                                                    unsigned q_base, float* s, Between between) {
  static_assert(NS == 64, "64-row tiles: one m tile, K in 4 parts");
  constexpr int kParts = 4, kPP = kRegPP, kPieces = kPP / 4;
  static_assert(kParts == kSwapabThreads / 128 && kParts * kPP == 32, "4 warpgroups: one K part each");
  const int part = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, c = lane & 3;
  const int row0 = 16 * w + (lane >> 2);
  const unsigned kv_base = dc::smem_addr(kv);
  int slot[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) slot[rh] = sid[row0 + 8 * rh];
  dc::RawPiece16 raw[2][kPieces];
  RowScales<Fmt, kPP> sc[2];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    if (slot[rh] >= 0) load_row<Fmt, P, kPP, kPieces>(cache, slot[rh], part, c, raw[rh], sc[rh]);
  }
  stamp(16);  // timeline builds only: this thread's record loads issued
  between(Index<kParts>{});
  stamp(12);  // timeline builds only: Q stored, the records' loads still in flight
  // The tile's stores: chunks 2 piece (+1) of rows row0 (+8). Piece part kPP + 4 i + c is 16-B chunk 2 c (+1) of
  // 64-dim block 2 part + i, and rows row0 and row0 + 8 share row & 7, so every store of the thread is one of two
  // swizzled addresses plus a compile-time offset (per piece, ptxas rebuilt each address: ~10 instructions).
  const unsigned st_lo = kv_chunk_addr(kv_base, row0, 2 * (part * kPP + c));
  const unsigned st_hi = kv_chunk_addr(kv_base, row0, 2 * (part * kPP + c) + 1);
  constexpr unsigned kBlockBytes = kNSA * 128, kHalfRows = 8 * 128;
  unsigned a[kPP][4];
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    static_for<0, kPieces>([&](auto ii) {
      constexpr int i = decltype(ii)::value;
      const int piece = part * kPP + 4 * i + c;
      const unsigned off = i * kBlockBytes + rh * kHalfRows;
      // A branch per item (a scheduling boundary, as gather_tile), with an unused row's zeros on a path of its
      // own: zeroed ahead of the branch, every used item paid 8 register moves. With the two addresses above,
      // ~18 instructions fewer a used piece; the decode after the loads land is issue-bound (H200 session 31
      // run 1, 8 heads T = 1: the gather's barrier -160 ns; swap-AB v41_fp8 T = 1 0.969-0.976, SWA-only 0.97-0.98).
      if (slot[rh] >= 0) {
        dc::RawPiece16& r = raw[rh][i];
        r.scale = sc[rh].template byte<i>(c);
        uint4 lo, hi;
        dc::decode_piece16<Fmt, i == kPieces - 1>(r, piece, lo, hi);
        const unsigned wd[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int k = 0; k < 8; ++k) a[4 * i + k / 2][2 * (k & 1) + rh] = wd[k];
        store_chunk_pair(st_lo + off, st_hi + off, lo, hi);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) a[4 * i + k / 2][2 * (k & 1) + rh] = 0u;
        const uint4 z = make_uint4(0, 0, 0, 0);
        store_chunk_pair(st_lo + off, st_hi + off, z, z);
      }
      if (rh == 0 && i == 0) stamp(17);  // timeline builds only: the first item landed and was stored
    });
  }
  stamp(13);     // this thread's part of the tile decoded and stored
  stamp_warp();  // timeline builds only
  // Q (generic st.shared) before any warpgroup's wgmmas: the fence and a CTA barrier. Not right after Q's
  // stores: there the decode started 0.25-0.45 us later (session 20, runs 2-5). Not because the fence
  // (MEMBAR.ALL.CTA) waits for the loads in flight, as first thought: a timed fence with a load in flight
  // costs what it costs alone (wgmma_rate_probe section 9, session 21); more likely the barrier: no warp
  // decoded before every warp had its Q loaded and stored.
  wg::fence_operand_stores();
  __syncthreads();
  stamp(3);
  stamp_warp_spread(22, 23);  // timeline builds only: the slowest and the fastest warp's gather

  float acc[kH / 2];
#pragma unroll
  for (int i = 0; i < kH / 2; ++i) acc[i] = 0.0f;
  wg::pin(acc);
  wg::fence();  // the accumulators' zeroing and the A fragments' writes before the wgmmas
  stamp(18);    // timeline builds only: about to issue the first S^T wgmma
#pragma unroll
  for (int ks = 0; ks < kPP; ++ks) {
    const int k16 = part * kPP + ks;  // global (permuted) k16 step
    const unsigned b = q_base + (k16 >> 2) * (kH * 128) + (k16 & 3) * 32;
    wg::mma_bf16_rs<kH>(acc, a[ks], wg::sw128_desc(b, 0, 1024));
  }
  wg::commit();
  stamp(19);  // timeline builds only: every S^T wgmma issued
  wg::wait_all();
  stamp(14);  // timeline builds only
  wg::pin(acc);
#pragma unroll
  for (int ks = 0; ks < kPP; ++ks) wg::pin(a[ks]);  // A stays untouched until the wgmmas retired
  store_score_part<NS>(acc, 0, part, s);
}

}  // namespace swapab
}  // namespace swapjit
