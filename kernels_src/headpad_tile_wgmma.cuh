// headpad_tile_wgmma.cuh: the two GEMMs of one 64-slot chunk of the head-padded kernel with sm_90a wgmma
// (variant "wgmma"). The heads are M (one m64 tile), so the two warpgroups split the other side:
// warpgroup g = w / 4 computes S for slots 32 g .. (m64n32k16, Q as A and the KV chunk as a K-major B) and
// O = P V for dims 256 g .. (m64n256k16, P as A and the same KV bytes read MN-major as B; HOPPER_NOTES
// §1.4 with the tile as B instead of A). Both accumulators have the m16n8 layout of the mma twin
// (headpad_tile_mma.cuh, HOPPER_NOTES §1.5), so the softmax and the export are shared: register i of the
// wgmma accumulator is element [i / 4][i % 4] of the mma one. P V is issued and waited in two calls
// (pv_issue_wgmma, pv_wait_wgmma); nothing runs between them since a gather there was slower than the two
// one after the other (perf-notes, session 28).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant (sm_90a only).
#pragma once
#include "headpad_shape.cuh"
#include "wgmma.cuh"

namespace swapjit {
namespace hp {

constexpr unsigned kBlockBytes = kHeadpadChunk * 128;  // one 64-dim block of a 64-row tile (SW128 atoms)

// S[64 heads][32 slots of warpgroup dh] = Q K^T: 32 k16 steps; ends after the wgmmas retired.
__device__ __forceinline__ void scores_wgmma(unsigned sbase, unsigned kv, int dh, float (&s)[4][4]) {
  float acc[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) acc[i] = 0.0f;
  wg::pin(acc);
  wg::fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const unsigned in_block = (kk >> 2) * kBlockBytes + (kk & 3) * 32;
    const unsigned a = sbase + kSm.q + in_block;
    const unsigned b = kv + in_block + 32 * dh * 128;  // rows 32 dh .. of the chunk: 4 groups of 8 at SBO
    wg::mma_bf16<32, 0>(acc, wg::sw128_desc(a, 0, 1024), wg::sw128_desc(b, 0, 1024));
  }
  wg::commit();
  wg::wait_all();
  wg::pin(acc);
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i / 4][i % 4] = acc[i];
}

// O += P_hi V + P_lo V for dims 256 dh ..: 4 k16 steps (16 slots) each for P_hi and P_lo, issued and
// committed, not waited for. The caller rescaled O (registers) before: wg::fence() orders that first, and the
// pins keep the compiler from moving those multiplications past it.
__device__ __forceinline__ void pv_issue_wgmma(unsigned sbase, unsigned kv, int dh, float (&o)[32][4]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) wg::pin(o[i]);
  wg::fence();
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const unsigned p = sbase + (part == 0 ? kSm.p : kSm.p_lo);
#pragma unroll
    for (int ks = 0; ks < kHeadpadChunk / 16; ++ks) {
      // MN-major B = V: 16 slots (two 8-slot groups at SBO) of the 4 dim blocks 4 dh .. (LBO = block stride).
      const unsigned b = kv + 4 * dh * kBlockBytes + ks * 16 * 128;
      wg::mma_bf16_n256_tb(o, wg::sw128_desc(p + ks * 32, 0, 1024), wg::sw128_desc(b, kBlockBytes, 1024));
    }
  }
  wg::commit();
}
__device__ __forceinline__ void pv_wait_wgmma(float (&o)[32][4]) {
  wg::wait_all();
#pragma unroll
  for (int i = 0; i < 32; ++i) wg::pin(o[i]);
}

}  // namespace hp
}  // namespace swapjit
