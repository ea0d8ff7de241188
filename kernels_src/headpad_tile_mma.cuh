// headpad_tile_mma.cuh: the two GEMMs of one 64-slot chunk of the head-padded kernel with mma.sync m16n8k16
// + ldmatrix (variant "mma", any sm_90+; the sm_100a build). Warp w: heads 16 * (w % 4) .. of the M tile;
// S for slots 32 * (w / 4) .., O = P V for dims 256 * (w / 4) ... The wgmma twin: headpad_tile_wgmma.cuh.
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include "headpad_shape.cuh"

namespace swapjit {
namespace hp {

// S[16 heads][32 slots] = Q K^T over 512 dims: 32 k-steps x 4 n-tiles, m16n8 accumulator layout (lane l:
// rows l / 4 and + 8, columns 2 (l % 4) and + 1 of each n-tile).
__device__ __forceinline__ void scores_mma(unsigned sbase, unsigned kv, int hg, int dh, float (&s)[4][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll 4
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    unsigned a[4];
    dc::ldmatrix_x4(sbase + kSm.q + tile_off(16 * hg + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)), a);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      unsigned b[4];  // n-tile 2np: b[0], b[1]; n-tile 2np+1: b[2], b[3]
      dc::ldmatrix_x4(kv + tile_off(32 * dh + 16 * np + (lane >> 4) * 8 + (lane & 7), 2 * kk + ((lane >> 3) & 1)), b);
      dc::mma_bf16_16816(s[2 * np], a, b[0], b[1]);
      dc::mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// O += P_hi V + P_lo V: 4 k-steps of 16 slots x 32 n-tiles of 8 dims, P from smem (kSm.p, kSm.p_lo).
__device__ __forceinline__ void pv_mma(unsigned sbase, unsigned kv, int hg, int dh, float (&o)[32][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll 1
  for (int ks = 0; ks < kHeadpadChunk / 16; ++ks) {
    unsigned a_hi[4], a_lo[4];
    const unsigned pa = p_off(16 * hg + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4));
    dc::ldmatrix_x4(sbase + kSm.p + pa, a_hi);
    dc::ldmatrix_x4(sbase + kSm.p_lo + pa, a_lo);
#pragma unroll
    for (int np = 0; np < 16; ++np) {
      unsigned b[4];  // .trans: rows are slots (k), 16-B chunks are dims (n)
      dc::ldmatrix_x4_trans(kv + tile_off(16 * ks + ((lane >> 3) & 1) * 8 + (lane & 7), 32 * dh + 2 * np + (lane >> 4)), b);
      dc::mma_bf16_16816(o[2 * np], a_hi, b[0], b[1]);
      dc::mma_bf16_16816(o[2 * np + 1], a_hi, b[2], b[3]);
      dc::mma_bf16_16816(o[2 * np], a_lo, b[0], b[1]);
      dc::mma_bf16_16816(o[2 * np + 1], a_lo, b[2], b[3]);
    }
  }
}

}  // namespace hp
}  // namespace swapjit
