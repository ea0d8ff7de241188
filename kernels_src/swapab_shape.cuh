// swapab_shape.cuh: the swap-AB kernel's compile-time shape (derived from the key of the prelude) and its
// cluster helpers, shared by swapab_decode.cuh (the per-tile work) and swapab_merge.cuh (the merge).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include "decode_common.cuh"
#include "swapab_traits.cuh"

namespace swapjit {
namespace swapab {

static_assert(swapab_key_supported(kKey), "swapab_decode: unsupported compile key");
static_assert(kVariant == kVariantMma || kVariant == kVariantWgmma, "swapab_decode: variant mma or wgmma");
constexpr bool kWgmma = kVariant == kVariantWgmma;

constexpr int kH = kKey.live_heads;
constexpr int kNT = kH / 8;                          // n-tiles of 8 heads
constexpr int kNSA = swapab_tile_alloc(kKey);        // slots per allocated tile (row stride of S, P)
constexpr int kCluster = swapab_cluster(kKey);                  // CTAs per token (128-slot compressed tiles)
constexpr int kWideCluster = swapab_wide_cluster(kKey, kVariant);  // under wide tiling, 0 = none
constexpr int kMidCluster = swapab_mid_cluster(kKey, kVariant);    // under mid tiling, 0 = none
constexpr int kSwaTiles = swapab_swa_tiles(kKey);
constexpr SwapabSmem kSm = swapab_smem(kKey, kVariant);
// Softmax: kTPH consecutive threads of one warp per head (the first kH * kTPH threads take part).
constexpr int kTPH = kSwapabThreads / kH < 32 ? kSwapabThreads / kH : 32;
// S^T work item = (16-slot m-tile, group of kNTW n-tiles): the heads are split in kNSplit groups so that
// the 8 m-tiles of a compressed tile give one item to each of the 16 warps.
constexpr int kNSplit = kNT >= 2 ? 2 : 1;
constexpr int kNTW = kNT / kNSplit;
// O^T: warp w owns output dims 16 * kMI * w ...: kMI m-tiles of 16 dims.
constexpr int kMI = kHeadDim / 16 / kSwapabWarps;
constexpr float kNegInf = __builtin_bit_cast(float, 0xFF800000u);  // -inf, a constant expression
static_assert(kNTW == 1 || kNTW % 2 == 0, "B fragments are loaded two n-tiles at a time (or one alone)");
static_assert(kTPH * kH <= kSwapabThreads && 32 % kTPH == 0, "a head's softmax threads sit in one warp");
static_assert(kMI * 16 * kSwapabWarps == kHeadDim, "O^T: the warps share the 512 output dims evenly");
static_assert(kSm.kv % 1024 == 0 && kSm.q % 1024 == 0 && kSm.p_hi % 1024 == 0 && kSm.p_lo % 1024 == 0,
              "SW128 operands (KV, Q, P) start on 1024-B atoms: the descriptors carry base offset 0");

// ---------------------------------------------------------------------------------------------------
// Block-major SW128 addresses (swapab_traits.cuh): a matrix of R rows x 512 bf16 as 8 blocks of 64 dims;
// row r of block b at b * R * 128 + r * 128, its 16-B chunk cc at cc ^ (r & 7). `chunk` counts 16-B chunks
// along the row (0..63 for a KV or Q row; slot / 8 for a P row, whose blocks hold 64 slots).
template <int R>
__device__ __forceinline__ unsigned sw128_addr(unsigned base, int row, int chunk) {
  return base + (chunk >> 3) * (R * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}
__device__ __forceinline__ unsigned kv_chunk_addr(unsigned base, int row, int chunk) {
  return sw128_addr<kNSA>(base, row, chunk);
}
__device__ __forceinline__ unsigned q_chunk_addr(unsigned base, int h, int chunk) {
  return sw128_addr<kH>(base, h, chunk);
}
// Two 16-B chunks (dims +0..+7 and +8..+15 of a piece) into the smem KV tile (both gathers).
__device__ __forceinline__ void store_chunk_pair(unsigned at_lo, unsigned at_hi, const uint4& lo, const uint4& hi) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(at_lo), "r"(lo.x), "r"(lo.y), "r"(lo.z), "r"(lo.w)
               : "memory");
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(at_hi), "r"(hi.x), "r"(hi.y), "r"(hi.z), "r"(hi.w)
               : "memory");
}

// P_hi and P_lo share one matrix of 2 kH rows (swapab_traits.cuh): `base` is either half's address.
__device__ __forceinline__ unsigned p_chunk_addr(unsigned base, int h, int chunk) {
  return sw128_addr<2 * kH>(base, h, chunk);
}
// Byte offset of P[h][slot j] (one bf16) from either half's base.
__device__ __forceinline__ int p_byte(int h, int j) {
  return (j >> 6) * (2 * kH * 128) + h * 128 + ((((j >> 3) & 7) ^ (h & 7)) << 4) + (j & 7) * 2;
}

// The O^T export, [h][512] fp32 read by the merge as tasks (h, 8-dim chunk) of 32 B, with each task's 32 B
// at position export_task_slot(task) instead of task: the chunk index XOR (h >> 1) & 3, a permutation inside
// aligned groups of 4 tasks. Why: an accumulator register holds, across a warp, heads h0 + 2 j (j = 0..3)
// at 8 consecutive dims; in the plain layout the four heads share one set of 8 banks, and the export's
// 4-way conflicts took 0.64 us at 16 heads and 1.2 us at 32 (swapjit timeline, session 6). Groups of 4
// tasks stay in place, so every merge slice (a multiple of 32 tasks) covers the same bytes as before.
__device__ __forceinline__ int export_task_slot(int task) { return task ^ ((task >> 7) & 3); }
__device__ __forceinline__ int export_index(int h, int d) {
  return export_task_slot(h * (kHeadDim / 8) + (d >> 3)) * 8 + (d & 7);
}

// m64 tiles of slots in a tile of NS slots (96: two, the second half used); the wgmma S^T splits K over
// 4 / score_mtiles(NS) warpgroups per m tile (swapab_tile_wgmma.cuh, the softmax adds the parts).
constexpr int score_mtiles(int ns) { return (ns + 63) / 64; }
// Q's 8-dim chunks, item it = tid + i * kSwapabThreads -> (head, chunk c). Every thread's items share c (its
// RoPE coefficients). mma: 64 consecutive items per head. wgmma: a warp's lanes take 8 heads x 4 chunk pairs
// (lane l: head l % 8, chunk 2 (l / 8) + odd), so that the permuted Q stores (gather_scores_wgmma) of a warp
// fall on 32 distinct banks; with one head a warp they fell on 8 (4-way conflicts, +0.8 us at 32 heads,
// T = 16, session 20 run 2).
__device__ __forceinline__ int q_item_head(int it) {
  return kWgmma ? 8 * (it >> 9) + (it & 7) : it >> 6;
}
__device__ __forceinline__ int q_item_chunk(int it) {
  return kWgmma ? 8 * ((it >> 6) & 7) + 2 * ((it >> 3) & 3) + ((it >> 5) & 1) : it & 63;
}
// An int as a type: a compile-time argument of a generic lambda (the K parts of Q's permuted stores, 0 for
// none; an item index of static_for).
template <int I>
struct Index {
  static constexpr int value = I;
};
// f(Index<I>{}) for I = I0 .. N - 1, each with I as a constant (template arguments per item).
template <int I0, int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (I0 < N) {
    f(Index<I0>{});
    static_for<I0 + 1, N>(f);
  }
}

// ---------------------------------------------------------------------------------------------------
// The per-token tiling one launch runs with: C CTAs per token, compressed tiles of CompNS slots (the SWA
// tiles are always kSwapabSwaTile). Each tiling the key has is its own entry point (swapab_decode.cuh),
// chosen by the launcher.
// Rebalanced tilings (wgmma): with 128-slot compressed tiles the 64-slot SWA CTAs finish ~2.6 us before the
// compressed ones and wait at the publishing barrier (swapjit timeline, 32 heads T = 16). So each SWA CTA also
// takes kSwaExtra compressed entries (its rows 64.., in the compressed format), and the compressed CTAs share
// the rest: V4.1-Flash 2 x (64 + 32) and 4 x 112 of 128 rows in the portable tiling, 12.5 % fewer records and
// decodes on the critical path; in the mid tiling (96-slot tiles) 2 x (64 + 16) and 6 x 80, every CTA 80 rows
// instead of 64 and 96 (a SWA tile of 80 rows is gathered as 96, its last 16 unused). Where the split is not
// even (or the key has no such shape), 0: as before.
constexpr int swapab_swa_extra(int cluster, int comp_ns) {
  const int extra = comp_ns == kSwapabCompTile ? 32 : comp_ns == kSwapabMidCompTile ? 16 : 0;
  const int comp = kKey.topk > 0 ? cluster - kSwaTiles : 0;
  if (!kWgmma || extra == 0 || comp <= 0 || kKey.window != kSwaTiles * kSwapabSwaTile) return 0;
  const int rest = kKey.topk - kSwaTiles * extra;
  return rest > 0 && rest % comp == 0 && rest / comp <= comp_ns - 16 ? extra : 0;
}
template <int C, int CompNS>
struct Tiling {
  static constexpr int kCluster = C;
  static constexpr int kCompNS = CompNS;
  static constexpr int kSwaExtra = swapab_swa_extra(C, CompNS);       // compressed entries of a SWA CTA
  static constexpr int kSwaNS = kSwapabSwaTile + kSwaExtra;          // a SWA CTA's rows: 64, 80 or 96
  static constexpr int kCompShare =                                  // a compressed CTA's entries
      kSwaExtra > 0 ? (kKey.topk - kSwaTiles * kSwaExtra) / (C - kSwaTiles) : CompNS;
  // A compressed CTA's computed rows: its entries rounded up to a k16 step (112 or 80 when rebalanced, else
  // CompNS).
  static constexpr int kCompRows = kSwaExtra > 0 ? (kCompShare + 15) / 16 * 16 : CompNS;
  static_assert(kSwaNS <= kNSA && kCompShare <= CompNS, "the rows fit the allocated tile");
};

// Cluster helpers (HOPPER_NOTES §5), for a cluster of C CTAs. With a cluster of one, plain CTA barriers
// and local reads.
template <int C>
__device__ __forceinline__ int cluster_rank() {
  if constexpr (C == 1) {
    return 0;
  } else {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return static_cast<int>(r);
  }
}

using dc::cluster_sync;          // cluster barriers of C CTAs (decode_common.cuh)
using dc::cluster_sync_relaxed;
using dc::stamp;  // the development timeline (timeline_stamps.cuh)
using dc::stamp_warp;
using dc::stamp_warp_spread;

// Reads the fp32 at the same smem offset as `local` in CTA `rank` of the cluster.
template <int C>
__device__ __forceinline__ float ld_peer_f32(const float* local, int rank) {
  if constexpr (C == 1) {
    return *local;
  } else {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(dc::smem_addr(local)), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
  }
}

}  // namespace swapab
}  // namespace swapjit
