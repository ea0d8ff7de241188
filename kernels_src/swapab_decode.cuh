// swapab_decode.cuh: the swap-AB sparse decode attention kernel (SPEC.md §3.2; docs/swapab-design.md).
// KV slots sit on the MMA M side and the 16 or 32 live heads on N, so no head padding is computed.
// One thread-block cluster per decode token, one CTA per tile of the token's lists: ceil(window/64) SWA
// tiles of 64 slots, then ceil(topk/128) compressed tiles of 128 slots. Each CTA computes an unnormalised
// partial (m_c, L_c, O_c) per head; the cluster merges them over distributed shared memory in FIXED rank
// order (no atomics, SPEC §3.3), adds the sink once, and writes the output. One launch per step.
// Variant "mma" (kVariant == kVariantMma): mma.sync m16n8k16 bf16 with ldmatrix (+.trans), any sm_90+.
// NOTE: compiled by NVRTC after the prelude that defines kKey and kVariant (see DESIGN.md conventions).
#pragma once
#include "swapab_merge.cuh"
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

// ---------------------------------------------------------------------------------------------------
// Swizzled addresses. KV / Q rows are 1024 B (64 chunks of 16 B); P rows are kNSA * 2 B. A row's chunk c
// is stored at chunk c ^ (row & 7), so the 8 rows an ldmatrix matrix reads hit 8 different bank groups,
// both for the row-wise (S^T) and the transposed (O^T) reads of the same KV tile.
__device__ __forceinline__ unsigned kv_chunk_addr(unsigned base, int row, int chunk) {
  return base + row * kSwapabKvRowBytes + ((chunk ^ (row & 7)) << 4);
}
__device__ __forceinline__ unsigned p_chunk_addr(unsigned base, int h, int chunk) {
  return base + h * (kNSA * 2) + ((chunk ^ (h & 7)) << 4);
}

// Gathers and dequantises the tile's records into the bf16 KV tile; unused entries give zero rows.
// Work item = (slot j, 16-dim piece): consecutive threads read consecutive pieces of one record. A thread
// issues the loads of a whole batch before decoding the first item, so their latencies overlap: all of its
// items (4 or 8: one memory latency per tile); the raw bytes take 5 (v41_fp8), 3 (v41_fp4) or 9 (v4_fp8,
// whose RoPE pieces carry 32 bytes) registers per item.
template <int Fmt, int P, int NS>
__device__ __forceinline__ void gather_tile(const CacheView& cache, const int* sid /* smem [NS] */,
                                            unsigned char* kv /* smem bf16 [NS][512], swizzled */) {
  constexpr int kItems = NS * 32 / kSwapabThreads;  // 4 or 8 per thread
  constexpr int kBatch = kItems;
  static_assert(kItems % kBatch == 0, "whole batches");
  const unsigned kv_base = dc::smem_addr(kv);
#pragma unroll 1
  for (int b0 = 0; b0 < kItems; b0 += kBatch) {
    dc::RawPiece16 raw[kBatch];
    unsigned used = 0;  // bit i: item i has a record
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int it = threadIdx.x + (b0 + i) * kSwapabThreads;
      const int slot = sid[it >> 5];
      if (slot >= 0) {
        raw[i] = dc::load_piece16<Fmt, P>(dc::record_ptrs<Fmt, P>(cache, slot), it & 31);
        used |= 1u << i;
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int it = threadIdx.x + (b0 + i) * kSwapabThreads;
      const int j = it >> 5, piece = it & 31;
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (used & (1u << i)) dc::decode_piece16<Fmt>(raw[i], piece, lo, hi);
      const unsigned a0 = kv_chunk_addr(kv_base, j, 2 * piece), a1 = kv_chunk_addr(kv_base, j, 2 * piece + 1);
      asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(a0), "r"(lo.x), "r"(lo.y), "r"(lo.z), "r"(lo.w)
                   : "memory");
      asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(a1), "r"(hi.x), "r"(hi.y), "r"(hi.z), "r"(hi.w)
                   : "memory");
    }
  }
}

// S^T = KV · Q^T for this tile (M = slots, N = heads, K = 512), times sm_scale, into s[h][slot];
// unused slots get -inf. Item = (m-tile, head group): warp w takes items w, w + 16, ...
__device__ __forceinline__ void scores(int ns, float sm_scale, unsigned kv_base, unsigned q_base,
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
      load_b_frags<kNTW>(b, ks, nt0, [&](int h, int c) { return kv_chunk_addr(q_base, h, c); });
#pragma unroll
      for (int nt = 0; nt < kNTW; ++nt) dc::mma_bf16_16816(acc[nt], a, b[nt][0], b[nt][1]);
    }
#pragma unroll
    for (int nt = 0; nt < kNTW; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int slot = mt * 16 + (lane >> 2) + (i >> 1) * 8;
        const int h = (nt0 + nt) * 8 + 2 * (lane & 3) + (i & 1);
        s[h * kNSA + slot] = sid[slot] >= 0 ? acc[nt][i] * sm_scale : kNegInf;
      }
    }
  }
}

// Per-head softmax over the tile's NS slots: m_c = max, p = exp(z - m_c) split into bf16 hi + lo,
// L_c = sum p (fp32, fixed order). kTPH consecutive threads of one warp serve one head, NS / kTPH slots
// each, read into registers before the first use (with a run-time slot count the loops were not unrolled
// and each iteration waited on its own smem loads, behind the previous iteration's stores).
template <int NS>
__device__ __forceinline__ void softmax_tile(const int* sid, const float* s, unsigned char* p_hi,
                                             unsigned char* p_lo, float* ml /* smem fp32 [2][kH] */) {
  static_assert(NS % kTPH == 0 && NS <= kNSA, "whole slots per thread, within the allocated rows");
  constexpr int kPer = NS / kTPH;
  if (threadIdx.x >= kH * kTPH) return;  // whole warps: kH * kTPH is a multiple of 32
  const int h = threadIdx.x / kTPH, sub = threadIdx.x % kTPH;
  float z[kPer];
  bool used[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    z[i] = s[h * kNSA + sub + i * kTPH];
    used[i] = sid[sub + i * kTPH] >= 0;
  }
  float m = kNegInf;
#pragma unroll
  for (int i = 0; i < kPer; ++i) m = fmaxf(m, z[i]);
#pragma unroll
  for (int o = kTPH / 2; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  float l = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = sub + i * kTPH;
    // An unused slot has p = 0 exactly (its KV row is zero too); m is finite whenever a slot is used.
    const float pv = used[i] ? expf(z[i] - m) : 0.0f;
    const unsigned short hi = fp::float_to_bf16_rn(pv);
    const unsigned short lo = fp::float_to_bf16_rn(pv - fp::bf16_to_float(hi));  // exact difference
    const int byte = h * (kNSA * 2) + (((j >> 3) ^ (h & 7)) << 4) + (j & 7) * 2;
    *reinterpret_cast<unsigned short*>(p_hi + byte) = hi;
    *reinterpret_cast<unsigned short*>(p_lo + byte) = lo;
    l += pv;
  }
#pragma unroll
  for (int o = kTPH / 2; o >= 1; o >>= 1) l += __shfl_xor_sync(0xFFFFFFFFu, l, o);
  if (sub == 0) {
    ml[h] = m;  // -inf for an empty tile
    ml[kH + h] = l;
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

}  // namespace swapab

// grid.x = T * cluster, cluster.x = cluster, block.x = kSwapabThreads, dynamic smem = swapab_smem(kKey).total.
__global__ void __launch_bounds__(kSwapabThreads, 1) swapab_decode_kernel(const __grid_constant__ DecodeParams p) {
  using namespace swapab;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* kv = smem + kSm.kv;        // bf16 [kNSA][512], swizzled
  unsigned char* qs = smem + kSm.q;         // bf16 [kH][512], swizzled
  float* s = reinterpret_cast<float*>(smem + kSm.s);      // fp32 [kH][kNSA]
  unsigned char* p_hi = smem + kSm.p_hi;    // bf16 [kH][kNSA], swizzled
  unsigned char* p_lo = smem + kSm.p_lo;    // bf16 [kH][kNSA], swizzled
  float* ml = reinterpret_cast<float*>(smem + kSm.ml);    // fp32 [2][kH]: m_c, L_c
  int* sid = reinterpret_cast<int*>(smem + kSm.sid);      // i32 [kNSA]
  float* oexp = reinterpret_cast<float*>(smem + kSm.oexp);  // fp32 [kH][512], aliases kv
  float* wts = reinterpret_cast<float*>(smem + kSm.wts);    // fp32 [kH][kCluster] merge weights
  float* den = reinterpret_cast<float*>(smem + kSm.den);    // fp32 [kH] merge denominators
  float* cs_s = reinterpret_cast<float*>(smem + kSm.cs);    // fp32 [64] the token's cos_sin row

  // Launch-parameter arithmetic only before the dependency wait.
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rank = cluster_rank();
  const int t = blockIdx.x / kCluster;
  const bool is_swa = rank < kSwaTiles;
  const int ns = is_swa ? kSwapabSwaTile : kSwapabCompTile;
  const int list_base = is_swa ? rank * kSwapabSwaTile : (rank - kSwaTiles) * kSwapabCompTile;

  // The push merge's receive barrier: one local arrival (with the expected bytes) plus the copies' bytes.
  // Initialised before any peer can target it: the cluster barrier after the export orders the two.
  __shared__ alignas(8) cuda::std::uint64_t recv_bar;
  if constexpr (kPushMerge) {
    if (tid == 0) {
      cuda::ptx::mbarrier_init(&recv_bar, 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
  }

  dc::grid_dependency_wait();

  // 1. The tile's slot ids (entry j used iff j < len and slot >= 0), and Q with RoPE.
  if (tid < ns) {
    const int j = list_base + tid;
    int slot = -1;
    if (is_swa) {
      if (j < kKey.window && j < p.swa_lens[t]) slot = p.swa_slots[static_cast<i64>(t) * p.swa_width + j];
    } else if constexpr (kKey.topk > 0) {
      if (j < kKey.topk && j < p.comp_lens[t]) slot = p.comp_slots[static_cast<i64>(t) * p.comp_width + j];
    }
    sid[tid] = slot < 0 ? -1 : slot;
  }
  if (tid >= kSwapabThreads - 64) cs_s[tid - (kSwapabThreads - 64)] = dc::cos_sin_row(p, t)[tid - (kSwapabThreads - 64)];
  {
    // All of a thread's Q loads are issued before the first RoPE / store (latency overlap).
    constexpr int kQItems = kH * 64 / kSwapabThreads;  // 2, 4 or 8 chunks of 8 dims per thread
    uint4 qv[kQItems];
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const int it = tid + i * kSwapabThreads;
      qv[i] = dc::q_load_chunk8(p, t, it >> 6, it & 63);
    }
    const float* cs = dc::cos_sin_row(p, t);
    const unsigned q_base = dc::smem_addr(qs);
    static_assert(kSwapabThreads % 64 == 0, "a thread's Q chunks share c = tid & 63");
    const dc::RopeCoefs rope = dc::rope_coefs(tid & 63, cs);
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const int it = tid + i * kSwapabThreads;
      const int h = it >> 6, c = it & 63;
      const uint4 v = dc::q_rope_chunk8(qv[i], c, rope);
      asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(kv_chunk_addr(q_base, h, c)), "r"(v.x),
                   "r"(v.y), "r"(v.z), "r"(v.w)
                   : "memory");
    }
  }
  __syncthreads();

  // 2. Gather + exact dequant of the tile into smem (bf16).
  if (is_swa) {
    gather_tile<kKey.swa_format, kKey.swa_page, kSwapabSwaTile>(p.swa_cache, sid, kv);
  } else if constexpr (kKey.topk > 0) {
    gather_tile<kKey.comp_format, kKey.comp_page, kSwapabCompTile>(p.comp_cache, sid, kv);
  }
  __syncthreads();

  // 3. Scores, softmax, P·V of this tile.
  const unsigned kv_base = dc::smem_addr(kv);
  scores(ns, p.sm_scale, kv_base, dc::smem_addr(qs), sid, s);
  __syncthreads();
  if (is_swa) {
    softmax_tile<kSwapabSwaTile>(sid, s, p_hi, p_lo, ml);
  } else if constexpr (kKey.topk > 0) {
    softmax_tile<kSwapabCompTile>(sid, s, p_hi, p_lo, ml);
  }
  __syncthreads();
  float acc[kMI][kNT][4];
  values(ns, kv_base, dc::smem_addr(p_hi), dc::smem_addr(p_lo), acc);
  __syncthreads();  // every warp is done reading kv: the export may overwrite it

  // 4. Export the unnormalised O^T partial as [h][d] fp32 for the peers.
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int d = (warp * kMI + mi) * 16 + (lane >> 2) + (i >> 1) * 8;
        const int h = nt * 8 + 2 * (lane & 3) + (i & 1);
        oexp[h * kHeadDim + d] = acc[mi][nt][i];
      }
  // The bulk copies below read the export (and peers' copies overwrite the dead KV tile) through the async
  // proxy: order this thread's generic smem accesses before them (HOPPER_NOTES §1, async proxy).
  if constexpr (kPushMerge) cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  cluster_sync();  // every CTA's (m_c, L_c, O_c) is visible cluster-wide
  dc::launch_dependents();
  send_slices(smem, rank, &recv_bar);  // push merge only

  // 5. Merge in fixed rank order (swapab_merge.cuh): the per-head weights, then the output.
  merge_weights(p, ml, wts, den);
  merge_output(p, t, rank, smem, &recv_bar, wts, den, cs_s);
  cluster_sync();  // exit rule: no CTA leaves while a peer may still read its smem
}

}  // namespace swapjit
