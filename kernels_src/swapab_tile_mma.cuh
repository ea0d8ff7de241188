// swapab_tile_mma.cuh: the two GEMMs of a swap-AB tile with mma.sync m16n8k16 bf16 + ldmatrix (variant
// "mma", any sm_90+): S^T = KV · Q^T into the score buffer, and O^T = KV^T · (P_hi + P_lo) exported as the
// CTA's fp32 [h][d] partial. The KV tile, Q and P are block-major SW128 (swapab_traits.cuh).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include "swapab_shape.cuh"

namespace swapjit {
namespace swapab {

// B fragments of NT n-tiles (n-tile nt0 ..) for k-step ks from a [row = head][k] swizzled bf16 matrix:
// ldmatrix x4 takes two n-tiles (matrix i: n-tile +(i>>1), k chunk +(i&1)); a single n-tile takes x2.
template <int NT, class ChunkAddr>
__device__ __forceinline__ void load_b_frags(unsigned (&b)[NT][2], int ks, int nt0, ChunkAddr chunk_addr) {
  const int lane = threadIdx.x & 31;
  if constexpr (NT == 1) {
    unsigned r[2];
    dc::ldmatrix_x2(chunk_addr(nt0 * 8 + (lane & 7), 2 * ks + ((lane >> 3) & 1)), r);  // lanes 16..31: ignored, valid
    b[0][0] = r[0];
    b[0][1] = r[1];
  } else {
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      unsigned r[4];
      dc::ldmatrix_x4(chunk_addr((nt0 + 2 * np) * 8 + (lane >> 4) * 8 + (lane & 7), 2 * ks + ((lane >> 3) & 1)), r);
      b[2 * np][0] = r[0];
      b[2 * np][1] = r[1];
      b[2 * np + 1][0] = r[2];
      b[2 * np + 1][1] = r[3];
    }
  }
}

// S^T = KV · Q^T for this tile (M = slots, N = heads, K = 512), times zscale (sm_scale log2 e), into s[h][slot];
// unused slots get -inf. Item = (m-tile, head group): warp w takes items w, w + 16, ...
__device__ __forceinline__ void scores(int ns, float zscale, unsigned kv_base, unsigned q_base,
                                       const int* sid /* smem [kNSA] */, float* s /* smem fp32 [kH][kNSA] */) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int item = warp; item < (ns / 16) * kNSplit; item += kSwapabWarps) {
    const int mt = item % (ns / 16), nt0 = (item / (ns / 16)) * kNTW;
    float acc[kNTW][4];
#pragma unroll
    for (int nt = 0; nt < kNTW; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    // A (KV rows): matrix i = lane/8 covers rows +8*(i&1), k chunk +(i>>1).
    const int a_row = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const int a_kc = lane >> 4;
#pragma unroll 4
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      unsigned a[4];
      dc::ldmatrix_x4(kv_chunk_addr(kv_base, a_row, 2 * ks + a_kc), a);
      unsigned b[kNTW][2];  // B = Q^T, Q stored [h][d]
      load_b_frags<kNTW>(b, ks, nt0, [&](int h, int c) { return q_chunk_addr(q_base, h, c); });
#pragma unroll
      for (int nt = 0; nt < kNTW; ++nt) dc::mma_bf16_16816(acc[nt], a, b[nt][0], b[nt][1]);
    }
#pragma unroll
    for (int nt = 0; nt < kNTW; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int slot = mt * 16 + (lane >> 2) + (i >> 1) * 8;
        const int h = (nt0 + nt) * 8 + 2 * (lane & 3) + (i & 1);
        s[h * kNSA + slot] = sid[slot] >= 0 ? acc[nt][i] * zscale : kNegInf;
      }
    }
  }
}

// O^T = KV^T · P_hi + KV^T · P_lo (M = dims, N = heads, K = slots). Warp w owns dims 16*kMI*w .. (kMI
// m-tiles); the A fragments are the KV tile read transposed (ldmatrix .trans).
__device__ __forceinline__ void values(int ns, unsigned kv_base, unsigned phi_base, unsigned plo_base,
                                       float (&acc)[kMI][kNT][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) acc[mi][nt][0] = acc[mi][nt][1] = acc[mi][nt][2] = acc[mi][nt][3] = 0.0f;
  // A^T: matrix i covers slots +8*(i>>1) (k), dim chunk +(i&1) (m).
  const int a_slot = ((lane >> 4) << 3) + (lane & 7);
  const int a_dc = (lane >> 3) & 1;
  for (int ks = 0; ks < ns / 16; ++ks) {
    unsigned bh[kNT][2], bl[kNT][2];  // B = P^T hi / lo, stored [h][slot]
    load_b_frags<kNT>(bh, ks, 0, [&](int h, int c) { return p_chunk_addr(phi_base, h, c); });
    load_b_frags<kNT>(bl, ks, 0, [&](int h, int c) { return p_chunk_addr(plo_base, h, c); });
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      const int mt = warp * kMI + mi;
      unsigned a[4];
      dc::ldmatrix_x4_trans(kv_chunk_addr(kv_base, ks * 16 + a_slot, 2 * mt + a_dc), a);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        dc::mma_bf16_16816(acc[mi][nt], a, bh[nt][0], bh[nt][1]);
        dc::mma_bf16_16816(acc[mi][nt], a, bl[nt][0], bl[nt][1]);
      }
    }
  }
}

// O^T of the tile, then (after a CTA barrier: every warp is done reading kv, which the export aliases)
// the unnormalised partial as [h][d] fp32.
__device__ __forceinline__ void values_export(int ns, unsigned kv_base, unsigned phi_base, unsigned plo_base,
                                              float* oexp /* smem fp32 [kH][512], aliases kv */) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[kMI][kNT][4];
  values(ns, kv_base, phi_base, plo_base, acc);
  __syncthreads();
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int d = (warp * kMI + mi) * 16 + (lane >> 2) + (i >> 1) * 8;
        const int h = nt * 8 + 2 * (lane & 3) + (i & 1);
        oexp[export_index(h, d)] = acc[mi][nt][i];
      }
}

}  // namespace swapab
}  // namespace swapjit
