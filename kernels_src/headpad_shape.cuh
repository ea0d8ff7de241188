// headpad_shape.cuh: the head-padded kernel's compile-time shape (derived from the key of the prelude), its
// shared-memory address helpers and its cluster helpers, shared by headpad_decode.cuh (the chunk loop) and
// headpad_merge.cuh (the merge). Shapes, layouts and the smem plan: headpad_traits.cuh.
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include <cuda/ptx>
#include <cuda/std/limits>

#include "decode_common.cuh"
#include "headpad_traits.cuh"

namespace swapjit {
namespace hp {

constexpr int kH = kKey.live_heads;
constexpr int kSplits = headpad_splits(kKey);  // the key's portable shape (Shape<kSplits>)
// The chunk loop's smem regions (kv, q, p, p_lo, red, ml, valid, oexp): the same in every shape.
constexpr HeadpadSmem kSm = headpad_smem(kKey, kVariant);
constexpr int kLive = headpad_merge(kKey, kVariant).live;  // live heads of every M tile
constexpr int kMlRowBytes = 2 * kHeadpadMTile * 4;          // one CTA's (m, L): fp32 [2][64]
static_assert(kH == kLive || kH == 2 * kLive, "every M tile has kLive heads");
static_assert(kMlRowBytes % 16 == 0, "pushed in 16-B pieces");
constexpr bool kHasComp = kKey.topk > 0;

// One cluster shape of the kernel: S CTAs per M tile. The key's portable shape (kSplits) and, where
// headpad_wide_splits says so, a wide one (one chunk per CTA), each its own entry point (headpad_decode.cuh),
// chosen by the launcher. Only the merge's plan and regions differ between them (mlx, recv, bar, cs:
// headpad_smem); the chunk loop's are the same, so code outside decode_token and the merge keeps using kSm.
// Merge plan (headpad_traits.cuh): push (st.async of slices) with S > 1, a pulled tail if some tasks do not
// fit the receive area (kTail), 24-bit units where they all fit that way (kPacked, export_pack24.cuh).
template <int S>
struct Shape {
  static constexpr int kSplits = S;
  static constexpr int kCluster = headpad_mtiles(kKey) * S;
  static constexpr HeadpadSmem kSm = headpad_smem(kKey, kVariant, S);
  static constexpr HeadpadMerge kMg = headpad_merge(kKey, kVariant, S);
  static constexpr bool kPush = kMg.push;
  static constexpr bool kTail = kMg.push_tasks < kMg.tasks;
  static constexpr bool kPacked = kMg.packed;
  static constexpr int kTaskBytes = kMg.task_bytes;
  static_assert(kSm.kv == hp::kSm.kv && kSm.q == hp::kSm.q && kSm.p == hp::kSm.p && kSm.p_lo == hp::kSm.p_lo &&
                    kSm.red == hp::kSm.red && kSm.ml == hp::kSm.ml && kSm.valid == hp::kSm.valid &&
                    kSm.oexp == hp::kSm.oexp,
                "the chunk loop's regions do not depend on the shape");
  static_assert(kSm.total <= kHeadpadSmemLimit, "within the 227 KiB opt-in");
  static_assert(!kPacked || (!kTail && kLive % 8 == 0), "packed: every task pushed; whole 8-row stmatrix groups");
  static_assert(kMg.tasks % 32 == 0 && kMg.slice % 32 == 0 && kMg.tail_slice % 32 == 0 && kMg.push_tasks % 32 == 0,
                "whole warps take part in a task range or none (write_out_chunk<8>'s quad shuffles)");
  static_assert(kMg.tail_slice <= kHeadpadThreads, "one tail task per thread at most");
  static_assert(!kPush || (kSm.mlx % 16 == 0 && kSm.recv % 16 == 0 && kSm.bar % 8 == 0), "pushes: 16-B aligned");
};
constexpr int kWideSplits = headpad_wide_splits(kKey, kVariant);  // 0: no wide shape
using dc::kLog2e;
constexpr float kNegInf = -cuda::std::numeric_limits<float>::infinity();
static_assert(headpad_key_supported(kKey), "headpad_decode: unsupported compile key");
static_assert(kVariant == kVariantMma || kVariant == kVariantWgmma, "headpad_decode: variant mma or wgmma");
constexpr bool kWgmma = kVariant == kVariantWgmma;  // the chunk's two GEMMs: headpad_tile_wgmma.cuh / _mma.cuh

// Byte offset of 16-B chunk c of row r in a [64 rows][512] bf16 tile (a KV chunk, or Q). mma: 1024-B rows,
// the XOR spreads the same chunk of 8 consecutive rows over 8 bank groups, so ldmatrix (8 rows of one
// chunk) is conflict-free. wgmma: block-major SW128 (8 blocks of 64 dims, row r's 128 B at r * 128 in a
// block, chunk XOR r & 7), the canonical K-major operand layout whose bytes, read MN-major, are also V as
// the B of P V (HOPPER_NOTES §1.3-1.4); needs the tile 1024-B aligned.
__device__ __forceinline__ unsigned tile_off(int r, int c) {
  static_assert(kHeadpadChunk == kHeadpadMTile, "KV chunks and Q tiles have the same 64 rows");
  if constexpr (kWgmma) {
    return static_cast<unsigned>((c >> 3) * (kHeadpadChunk * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
  } else {
    return static_cast<unsigned>(r * kHeadpadRowBytes + ((c ^ (r & 7)) << 4));
  }
}
// Same for the [64][64] bf16 P tile (128-B rows, 8 chunks): in both variants this is also the K-major SW128
// layout of one 64-slot block, the A operand of the wgmma P V.
__device__ __forceinline__ unsigned p_off(int r, int c) {
  return static_cast<unsigned>(r * (kHeadpadChunk * 2) + ((c ^ (r & 7)) << 4));
}
// fp32 [64][512] O export: float pair i of head h. The XOR (bits 2..4 of the pair index) halves the bank
// conflicts of the accumulator-layout stores and keeps the merge's 32-float row reads conflict-free.
__device__ __forceinline__ unsigned oexp_off(int h, int pair) {
  return static_cast<unsigned>(h * (kHeadDim * 4) + ((pair ^ ((h & 7) << 2)) << 3));
}

__device__ __forceinline__ void st_shared_v4(unsigned addr, const uint4& v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// DSMEM (HOPPER_NOTES §5): map a local shared address to CTA `rank` of the cluster, read from it.
__device__ __forceinline__ unsigned map_rank(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// No "memory" clobber: the cluster barrier before the merge orders these reads, and without it the
// compiler may issue all of an item's DSMEM loads back to back (one latency instead of 3 * kSplits).
__device__ __forceinline__ float ld_cluster_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ float4 ld_cluster_v4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

}  // namespace hp
}  // namespace swapjit
