// swapab_tile_wgmma.cuh: the two GEMMs of a swap-AB tile with sm_90a wgmma (variant "wgmma"): one bf16
// KV tile in smem serves as the K-major A of S^T = KV · Q^T and, read MN-major, as the A of
// O^T = KV^T · (P_hi + P_lo) (HOPPER_NOTES §1.4, the recipe that ran on the H200). Both B operands (Q as
// [h][d], P as [h][slot]) are K-major. Against mma.sync: no ldmatrix, and every operand byte is read from
// smem once per wgmma instead of once per warp that needs its fragment (S^T read the KV tile twice and Q
// once per item; O^T read P once per warp).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant (sm_90a only).
#pragma once
#include "export_pack24.cuh"
#include "swapab_shape.cuh"
#include "wgmma.cuh"

namespace swapjit {
namespace swapab {

// A warpgroup's raw S^T partial (m tile mt, K part `part`, retired) as s[(part * kH + h) * swapab_score_row(NS) +
// slot] for the slots < NS (scores_wgmma, gather_scores_wgmma; the softmax adds the parts).
template <int NS>
__device__ __forceinline__ void store_score_part(const float (&acc)[kH / 2], int mt, int part, float* s) {
#pragma unroll
  for (int i = 0; i < kH / 2; ++i) {
    const int slot = mt * 64 + wg::acc_row(i), h = wg::acc_col(i);
    if (NS % 64 == 0 || slot < NS) s[(part * kH + h) * swapab_score_row(NS) + slot] = acc[i];
  }
}

// Raw partial scores of the tile: warpgroup g takes m64 tile g % kMT (kMT = NS / 64 rounded up) and K part g / kMT
// (the 512 dims in 4 quarters for 64 slots, 2 halves for 96 or 128), and stores its m64 x kH accumulator as s[(part
// * kH + h) * swapab_score_row(NS) + slot] for the slots < NS (a 96-slot tile's second m64 tile reads 32 rows past
// the tile: their scores are dropped here, never read). The softmax adds the parts in part order and applies
// sm_scale and the slot mask. Ends after the wgmmas retired (no barrier).
template <int NS>
__device__ __forceinline__ void scores_wgmma(unsigned kv_base, unsigned q_base, float* s) {
  constexpr int kMT = score_mtiles(NS);  // m64 tiles of slots
  constexpr int kParts = 4 / kMT;        // warpgroups per m tile, each a slice of K
  constexpr int kSteps = 32 / kParts;    // k16 steps per warpgroup
  static_assert(kMT * kParts == kSwapabThreads / 128 && kParts * swapab_score_row(NS) <= kSwapabWgmmaScoreRows &&
                    kMT * 64 <= kNSA,
                "4 warpgroups: one (m tile, K part) each; the parts fit the score rows, the m tiles the KV tile");
  const int g = threadIdx.x >> 7;
  const int mt = g % kMT, part = g / kMT;
  float acc[kH / 2];
#pragma unroll
  for (int i = 0; i < kH / 2; ++i) acc[i] = 0.0f;
  wg::pin(acc);
  wg::fence();
  stamp(18);  // timeline builds only: about to issue the first S^T wgmma
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const int k16 = part * kSteps + ks;                      // global k16 step: dims 16 * k16 ..
    const unsigned in_block = (k16 & 3) * 32;                // 4 k16 steps per 64-dim block
    const unsigned a = kv_base + (k16 >> 2) * (kNSA * 128) + mt * 64 * 128 + in_block;
    const unsigned b = q_base + (k16 >> 2) * (kH * 128) + in_block;
    wg::mma_bf16<kH, 0>(acc, wg::sw128_desc(a, 0, 1024), wg::sw128_desc(b, 0, 1024));
  }
  wg::commit();
  stamp(19);  // timeline builds only: every S^T wgmma issued
  wg::wait_all();
  stamp(14);  // timeline builds only
  wg::pin(acc);
  store_score_part<NS>(acc, mt, part, s);
}

// The packed export (export_pack24.cuh) of a warpgroup's O^T fragments: per m64 tile j (its warp's 16 dims are
// block b) and group q of 8 heads, register 4q + e holds heads h0 = 8q + 2 (l % 4) (e even) and h0 + 1 (e odd)
// at dims r = l / 4 (e < 2) and r + 8. The high halves of (h0, h1) at r, and at r + 8, are one stmatrix
// fragment word each; the low bytes of (h0: r, r + 8; h1: r, r + 8) are one word of the elements' fragment.
// .trans stores fragment column h as a 16-B row at the head's unit: lane 8 m + k gives matrix m's row k.
template <int kMPer, int kAcc>
__device__ __forceinline__ void export_packed(const float (&acc)[kMPer][kAcc], unsigned base) {
  namespace pk = pack24;
  constexpr int kQ = kH / 8;
  constexpr int kHiPer = 2 * kQ < 4 ? 2 * kQ : 4, kLoPer = kQ < 4 ? kQ : 4;  // matrices per stmatrix
  const int g = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int row = lane & 7, mat = lane >> 3;
#pragma unroll
  for (int j = 0; j < kMPer; ++j) {
    const int blk = (kMPer * g + j) * 4 + w;  // 16-dim block of this warp's rows
    unsigned hi[2 * kQ], lo[kQ];              // matrices 2q + half, and q
#pragma unroll
    for (int q = 0; q < kQ; ++q) {
      unsigned x[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) x[e] = pk::round24(__float_as_uint(acc[j][4 * q + e] + acc[j][4 * q + e + kH / 2]));
      hi[2 * q] = dc::prmt(x[0], x[1], pk::kHiPair);
      hi[2 * q + 1] = dc::prmt(x[2], x[3], pk::kHiPair);
      lo[q] = dc::prmt(dc::prmt(x[0], x[2], pk::kLoPair), dc::prmt(x[1], x[3], pk::kLoPair), pk::kLoQuad);
    }
#pragma unroll
    for (int k = 0; k < 2 * kQ / kHiPer; ++k) {
      const int m = k * kHiPer + mat % kHiPer, h = 8 * (m >> 1) + row;
      dc::stmatrix_trans<kHiPer>(base + pk::unit_index(h, blk) * pk::kUnitBytes + 16 * (m & 1), hi + k * kHiPer);
    }
#pragma unroll
    for (int k = 0; k < kQ / kLoPer; ++k) {
      const int h = 8 * (k * kLoPer + mat % kLoPer) + row;
      dc::stmatrix_trans<kLoPer>(base + pk::unit_index(h, blk) * pk::kUnitBytes + pk::kLoOffset, lo + k * kLoPer);
    }
  }
}

// O^T of the tile: warpgroup g owns the output dims of blocks 2g and 2g + 1 (two m64 tiles), K = the NS
// slots in k16 steps. B is P_hi and P_lo stacked (2 kH rows, one operand of N = 2 kH): one wgmma per step
// gives both products, in accumulator columns h (hi) and kH + h (lo), so the KV tile (A, 2 KB a wgmma) is
// read once instead of once per half; O = hi + lo is added after the last step. After the wgmmas retired
// and a CTA barrier (kv is dead: the export aliases it), the partial goes out as [h][d] fp32, or Packed
// (the push merge's 24-bit units, export_pack24.cuh) by stmatrix.trans straight from the fragments.
template <int NS, bool Packed>
__device__ __forceinline__ void values_export_wgmma(unsigned kv_base, unsigned p_base, float* oexp /* [kH][512] */) {
  constexpr int kMPer = kHeadDim / 64 / (kSwapabThreads / 128);  // m64 tiles per warpgroup: 2
  constexpr int kN = 2 * kH;
  const int g = threadIdx.x >> 7;
  float acc[kMPer][kN / 2];
#pragma unroll
  for (int j = 0; j < kMPer; ++j) {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[j][i] = 0.0f;
    wg::pin(acc[j]);
  }
  wg::fence();
  stamp(20);  // timeline builds only: about to issue the first O^T wgmma
#pragma unroll
  for (int ks = 0; ks < NS / 16; ++ks) {
    // P rows hold 64 slots a block (4 k16 steps); 8-row groups (hi, then lo) at SBO = 1024.
    const unsigned long long b = wg::sw128_desc(p_base + (ks >> 2) * (kN * 128) + (ks & 3) * 32, 0, 1024);
#pragma unroll
    for (int j = 0; j < kMPer; ++j) {
      // MN-major A = KV^T: 16 slots (two 8-slot atoms, SBO) of dim block kMPer * g + j (LBO = block stride).
      const unsigned a = kv_base + (kMPer * g + j) * (kNSA * 128) + ks * 16 * 128;
      wg::mma_bf16<kN, 1>(acc[j], wg::sw128_desc(a, kNSA * 128, 1024), b);
    }
  }
  wg::commit();
  stamp(21);  // timeline builds only: every O^T wgmma issued
  wg::wait_all();
  stamp(15);  // timeline builds only
#pragma unroll
  for (int j = 0; j < kMPer; ++j) wg::pin(acc[j]);
  // The export aliases Q and the scores (swapab_traits.cuh), dead since the softmax barrier: no wait for the
  // other warpgroups, whose wgmmas may still read the KV tile.
  static_assert(kSm.oexp != kSm.kv, "the export must not alias the KV tile the other warpgroups read");
  // Register i < kH / 2 holds column acc_col(i) < kH (hi); register i + kH / 2 holds column + kH (lo).
  if constexpr (Packed) {
    export_packed<kMPer, kN / 2>(acc, dc::smem_addr(oexp));
  } else {
#pragma unroll
    for (int j = 0; j < kMPer; ++j)
#pragma unroll
      for (int i = 0; i < kH / 2; ++i) {
        const int d = (kMPer * g + j) * 64 + wg::acc_row(i), h = wg::acc_col(i);
        oexp[export_index(h, d)] = acc[j][i] + acc[j][i + kH / 2];
      }
  }
}

}  // namespace swapab
}  // namespace swapjit
