// swapab_decode.cuh: the swap-AB sparse decode attention kernel (SPEC.md §3.2; docs/swapab-design.md).
// KV slots sit on the MMA M side and the 16 or 32 live heads on N, so no head padding is computed.
// One thread-block cluster per decode token, one CTA per tile of the token's lists: ceil(window/64) SWA
// tiles of 64 slots, then ceil(topk/128) compressed tiles of 128 slots. Each CTA computes an unnormalised
// partial (m_c, L_c, O_c) per head; the cluster merges them over distributed shared memory in FIXED rank
// order (no atomics, SPEC §3.3), adds the sink once, and writes the output. One launch per step.
// Variant "mma" (kVariant == kVariantMma): mma.sync m16n8k16 bf16 with ldmatrix (+.trans), any sm_90+.
// NOTE: compiled by NVRTC after the prelude that defines kKey and kVariant (see DESIGN.md conventions).
#pragma once
#include <cuda/ptx>

#include "decode_common.cuh"
#include "swapab_traits.cuh"

namespace swapjit {
namespace swapab {

static_assert(swapab_key_supported(kKey), "swapab_decode: unsupported compile key");
static_assert(kVariant == kVariantMma, "swapab_decode: only the mma variant exists so far");

constexpr int kH = kKey.live_heads;
constexpr int kNT = kH / 8;                          // n-tiles of 8 heads
constexpr int kNSA = swapab_tile_alloc(kKey);        // slots per allocated tile (row stride of S, P)
constexpr int kCluster = swapab_cluster(kKey);
constexpr int kSwaTiles = swapab_swa_tiles(kKey);
constexpr SwapabSmem kSm = swapab_smem(kKey);
// Softmax: kTPH consecutive threads of one warp per head (the first kH * kTPH threads take part).
constexpr int kTPH = kSwapabThreads / kH < 32 ? kSwapabThreads / kH : 32;
// S^T work item = (16-slot m-tile, group of kNTW n-tiles): the heads are split in kNSplit groups so that
// the 8 m-tiles of a compressed tile give one item to each of the 16 warps.
constexpr int kNSplit = kNT >= 2 ? 2 : 1;
constexpr int kNTW = kNT / kNSplit;
// O^T: warp w owns output dims 16 * kMI * w ...: kMI m-tiles of 16 dims.
constexpr int kMI = kHeadDim / 16 / kSwapabWarps;
constexpr float kNegInf = __builtin_bit_cast(float, 0xFF800000u);  // -inf, a constant expression
// Merge tasks (head, 8-dim chunk): 32 B of a CTA's fp32 O^T partial each, task = h * 64 + c8 at byte
// 32 * task of the [h][512] export. Push merge: rank r owns tasks [r * kSliceTasks, ...) (whole warps);
// every CTA bulk-copies each owner its slice of its partial (one DMA per peer instead of 2 * kCluster
// 16-B DSMEM loads per task, which ncu showed queueing at ~7 us per step) into a receive area
// [kCluster][kSliceTasks] x 32 B behind the export (the KV tile and Q are dead by then). A CTA's own
// slice is read in place (compute-sanitizer rejects a bulk copy whose shared::cluster target is itself).
constexpr int kTasks = kH * (kHeadDim / 8);
constexpr int kSliceTasks = ceil_div(ceil_div(kTasks, kCluster), 32) * 32;
constexpr int kExportBytes = kH * kHeadDim * 4;
constexpr int kRecvBytes = kCluster * kSliceTasks * 32;
constexpr bool kPushMerge = kCluster > 1 && kSm.oexp + kExportBytes + kRecvBytes <= kSm.s;
static_assert(kNTW == 1 || kNTW % 2 == 0, "B fragments are loaded two n-tiles at a time (or one alone)");
static_assert(kTPH * kH <= kSwapabThreads && 32 % kTPH == 0, "a head's softmax threads sit in one warp");
static_assert(kMI * 16 * kSwapabWarps == kHeadDim, "O^T: the warps share the 512 output dims evenly");

// ---------------------------------------------------------------------------------------------------
// Cluster helpers (HOPPER_NOTES §5). With a cluster of one, plain CTA barriers and local reads.
__device__ __forceinline__ int cluster_rank() {
  if constexpr (kCluster == 1) {
    return 0;
  } else {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return static_cast<int>(r);
  }
}

// Release our smem writes, acquire the peers'; also a full CTA barrier.
__device__ __forceinline__ void cluster_sync() {
  if constexpr (kCluster == 1) {
    __syncthreads();
  } else {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  }
}

// Reads the fp32 at the same smem offset as `local` in CTA `rank` of the cluster.
__device__ __forceinline__ float ld_peer_f32(const float* local, int rank) {
  if constexpr (kCluster == 1) {
    return *local;
  } else {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(dc::smem_addr(local)), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
  }
}

// Reads the 16 bytes (4 fp32) at the same smem offset as `local` (16-B aligned) in CTA `rank`.
__device__ __forceinline__ float4 ld_peer_v4(const float* local, int rank) {
  if constexpr (kCluster == 1) {
    return *reinterpret_cast<const float4*>(local);
  } else {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(dc::smem_addr(local)), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(remote)
                 : "memory");
    return v;
  }
}

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

// Per-head softmax over the tile's used slots: m_c = max, p = exp(z - m_c) split into bf16 hi + lo,
// L_c = sum p (fp32, fixed order). kTPH consecutive threads of one warp serve one head.
__device__ __forceinline__ void softmax_tile(int ns, const int* sid, const float* s, unsigned char* p_hi,
                                             unsigned char* p_lo, float* ml /* smem fp32 [2][kH] */) {
  if (threadIdx.x >= kH * kTPH) return;  // whole warps: kH * kTPH is a multiple of 32
  const int h = threadIdx.x / kTPH, sub = threadIdx.x % kTPH;
  float m = kNegInf;
  for (int j = sub; j < ns; j += kTPH) m = fmaxf(m, s[h * kNSA + j]);
#pragma unroll
  for (int o = kTPH / 2; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  float l = 0.0f;
  for (int j = sub; j < ns; j += kTPH) {
    // An unused slot has p = 0 exactly (its KV row is zero too); m is finite whenever a slot is used.
    const float pv = sid[j] >= 0 ? expf(s[h * kNSA + j] - m) : 0.0f;
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
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const int it = tid + i * kSwapabThreads;
      const int h = it >> 6, c = it & 63;
      const uint4 v = dc::q_rope_chunk8(qv[i], c, cs);
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
  softmax_tile(ns, sid, s, p_hi, p_lo, ml);
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
  unsigned char* recv = smem + kSm.oexp + kExportBytes;  // [kCluster][kSliceTasks] x 32 B (push merge)
  if constexpr (kPushMerge) {
    if (tid == 0) {  // my slice from every peer (my own part is read in place)
      const int mine = min(kSliceTasks, max(0, kTasks - rank * kSliceTasks));
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &recv_bar, static_cast<cuda::std::uint32_t>((kCluster - 1) * mine * 32));
    }
    if (tid < kCluster && tid != rank) {  // thread r sends peer r its slice of this CTA's partial
      const int n = min(kSliceTasks, max(0, kTasks - tid * kSliceTasks));
      if (n > 0) {
        void* dst = dc::map_rank_ptr(recv + rank * kSliceTasks * 32, tid);
        cuda::std::uint64_t* bar = dc::map_rank_ptr(&recv_bar, tid);
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared, dst,
                                 smem + kSm.oexp + tid * kSliceTasks * 32, static_cast<cuda::std::uint32_t>(n * 32), bar);
      }
    }
  }

  // 5. Merge in fixed rank order (SPEC §3.2 step 5). First the per-head weights, once per CTA: thread h
  // reads (m_r, L_r) of every rank, M = max over non-empty parts, w_r = exp(m_r - M) (0 for an empty
  // part), den = sum_r w_r L_r in rank order, plus the sink once (not scaled by sm_scale; null = -inf).
  if (tid < kH) {
    float mr[kCluster], lr[kCluster];
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {  // every DSMEM load issued before the first use
      mr[r] = ld_peer_f32(ml + tid, r);
      lr[r] = ld_peer_f32(ml + kH + tid, r);
    }
    float m_all = kNegInf;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) m_all = fmaxf(m_all, mr[r]);
    float dsum = 0.0f;  // stays 0 when every part is empty: the token outputs zeros
    if (m_all != kNegInf) {
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        const float w = mr[r] == kNegInf ? 0.0f : expf(mr[r] - m_all);
        wts[tid * kCluster + r] = w;
        dsum += w * lr[r];
      }
      if (p.sink != nullptr) dsum += expf(p.sink[tid] - m_all);
    } else {
#pragma unroll
      for (int r = 0; r < kCluster; ++r) wts[tid * kCluster + r] = 0.0f;
    }
    den[tid] = dsum;
  }
  __syncthreads();

  // Then the output: task = (head, 8-dim chunk), one thread each, so the four lanes of a quad hold one
  // 32-dim block (the MXFP8 amax is a 2-step quad shuffle). Each task sums the kCluster partials in rank
  // order (SPEC §3.3) with the weights above.
  static_assert(kTasks % 32 == 0 && kSliceTasks % 32 == 0, "whole warps take part or none (quad shuffles)");
  const auto merge_task = [&](int task, const float4 (&ov)[kCluster][2]) {
    const int h = task >> 6, c8 = task & 63;
    float o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {
      const float w = wts[h * kCluster + r];
      o[0] += w * ov[r][0].x;
      o[1] += w * ov[r][0].y;
      o[2] += w * ov[r][0].z;
      o[3] += w * ov[r][0].w;
      o[4] += w * ov[r][1].x;
      o[5] += w * ov[r][1].y;
      o[6] += w * ov[r][1].z;
      o[7] += w * ov[r][1].w;
    }
    const float dh = den[h];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = dh > 0.0f ? o[i] / dh : 0.0f;
    dc::write_out_chunk8(p, t, h, c8, o, cs_s);
  };
  if constexpr (kPushMerge) {
    while (!cuda::ptx::mbarrier_try_wait_parity(&recv_bar, 0u)) {
    }
    const int mine = min(kSliceTasks, max(0, kTasks - rank * kSliceTasks));
    for (int i = tid; i < mine; i += kSwapabThreads) {  // warp-uniform bound
      float4 ov[kCluster][2];
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        const unsigned char* at = r == rank ? smem + kSm.oexp + (rank * kSliceTasks + i) * 32  // in place
                                            : recv + (r * kSliceTasks + i) * 32;
        const float4* src = reinterpret_cast<const float4*>(at);
        ov[r][0] = src[0];
        ov[r][1] = src[1];
      }
      merge_task(rank * kSliceTasks + i, ov);
    }
  } else {
    // Pull merge (a cluster of one, or no room for the receive area): tasks spread over the cluster's
    // threads; a thread issues all its 2 * kCluster 16-B DSMEM loads before the first use.
    constexpr int kStride = kCluster * kSwapabThreads;
    for (int task = rank * kSwapabThreads + tid; task < kTasks; task += kStride) {  // warp-uniform bound
      const float* src = oexp + (task >> 6) * kHeadDim + (task & 63) * 8;
      float4 ov[kCluster][2];
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        ov[r][0] = ld_peer_v4(src, r);
        ov[r][1] = ld_peer_v4(src + 4, r);
      }
      merge_task(task, ov);
    }
  }
  cluster_sync();  // exit rule: no CTA leaves while a peer may still read its smem
}

}  // namespace swapjit
