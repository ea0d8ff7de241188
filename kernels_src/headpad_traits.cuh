// headpad_traits.cuh: compile-time constants, cluster shape and shared-memory plan of the head-padded
// decode kernel (headpad_decode.cuh). Plain host C++20 as well as device code: jit/kernel_family.cpp calls
// headpad_plan() to size the launch and the kernel calls the same functions, so no number is written twice.
// NOTE: no CUDA headers and no device code in this file.
#pragma once
#include "key_shape.cuh"

namespace swapjit {

// Heads sit on the MMA's M side, padded to one 64-row M tile (128 heads = two M tiles, on different CTAs
// of the token's cluster). 8 warps: warp w owns heads 16*(w%4)..+15 of the tile; for S = Q K^T it takes
// slots 32*(w/4)..+31 of the 64-slot chunk, for O = P V dims 256*(w/4)..+255 (128 fp32 accumulators/thread).
constexpr int kHeadpadThreads = 256;
constexpr int kHeadpadWarps = kHeadpadThreads / 32;
constexpr int kHeadpadMTile = 64;      // padded heads per CTA
constexpr int kHeadpadChunk = 64;      // slots per gathered chunk
constexpr int kHeadpadMaxCluster = 8;  // portable cluster limit (HOPPER_NOTES §5)
constexpr int kHeadpadChunksPerCta = 2;  // target chunks per CTA at the key's typical widths
// One chunk per CTA while that keeps the cluster at most this size (>= 30 such clusters are resident on the
// H200, so steps of up to 30 tokens run in one wave). Session 10 run 8 (H200): SWA-only layers (2 chunks) took
// 0.70-0.81x the one-CTA time at every T = 1..64; the compressed layer's 10 one-chunk CTAs took 0.72-0.84x at
// T = 1-4 but 1.9-2.5x at T >= 16 (7 clusters of 10 resident), so longer lists keep two chunks per CTA.
constexpr int kHeadpadOneChunkMaxCluster = 4;
constexpr int kHeadpadRowBytes = kHeadDim * 2;  // one bf16 row (KV slot or Q head): 64 chunks of 16 B

constexpr int headpad_mtiles(const KeyShape& k) { return ceil_div(k.live_heads, kHeadpadMTile); }
// 64-slot chunks of a full token: chunks never straddle the SWA/compressed boundary.
constexpr int headpad_chunks(const KeyShape& k) {
  return ceil_div(k.window, kHeadpadChunk) + (k.topk > 0 ? ceil_div(k.topk, kHeadpadChunk) : 0);
}
// CTAs that share one M tile's entry list.
constexpr int headpad_splits(const KeyShape& k) {
  const int chunks = headpad_chunks(k);
  const int want = chunks <= kHeadpadOneChunkMaxCluster ? chunks : ceil_div(chunks, kHeadpadChunksPerCta);
  const int cap = kHeadpadMaxCluster / headpad_mtiles(k);
  return want < 1 ? 1 : want > cap ? cap : want;
}
// Cluster rank r: M tile r / splits, entry share r % splits.
constexpr int headpad_cluster(const KeyShape& k) { return headpad_mtiles(k) * headpad_splits(k); }
// The wide shape (small T, as swap-AB's): one chunk per CTA, up to 16 CTAs a cluster (non-portable), one M
// tile only, wgmma keys (their packed merge fits every task); 0 = none. Session 10 run 8 (H200): one chunk per CTA
// took the compressed layer to 0.72-0.84x at T = 1-4 and 1.85-2.5x at T >= 16 (7 clusters of 10 resident), so the
// launcher takes it only while every token's cluster is resident at once (module_cache: wide_max_items).
constexpr int kHeadpadMaxWideCluster = 16;
constexpr int headpad_wide_splits(const KeyShape& k, int variant) {
  if (variant != kVariantWgmma || headpad_mtiles(k) != 1) return 0;
  const int chunks = headpad_chunks(k);
  const int wide = chunks < kHeadpadMaxWideCluster ? chunks : kHeadpadMaxWideCluster;
  return wide > headpad_splits(k) ? wide : 0;
}

// Shared-memory plan (bytes from the dynamic smem base, 16-B aligned; swizzles are in address arithmetic).
//   kv    bf16 [2][64][512]  double-buffered KV chunk; mma: slot s, 16-B chunk c at s*1024 + ((c ^ (s&7)) << 4);
//                            wgmma: block-major SW128, (c/8)*8192 + s*128 + (((c%8) ^ (s&7)) << 4) (tile_off)
//   q     bf16 [64][512]     RoPE'd Q of the tile's heads (padded rows zero), same layout by head
//   p     bf16 [64][64]      P_hi = bf16(P) of the current chunk; head h, 16-B chunk c at
//                            h*128 + ((c ^ (h&7)) << 4)
//   p_lo  bf16 [64][64]      P_lo = bf16(P - P_hi), same layout (SPEC §3.2 step 6 split: P V = P_hi V + P_lo V)
//   red   fp32 [2][64]       per-head partials of the two slot halves (row max, then L at the end)
//   ml    fp32 [2][64]       this CTA's (m, L) per padded head, log2 domain; read by peers over DSMEM
//   valid i32  [2][64]       per kv buffer: 1 if the chunk's slot is a used entry
//   oexp  fp32 [64][512]     O partial for the merge; ALIASES kv (written after the last P V MMA);
//                            head h, float pair i at h*2048 + ((i ^ ((h&7) << 2)) << 3). Packed merges
//                            (HeadpadMerge::packed): the live rows in 48-B units of 16 dims (export_pack24.cuh)
//
// Push merge (a cluster with kSplits > 1 CTAs per M tile; headpad_merge): after the publishing barrier the
// KV tiles, Q, P, red and valid are dead, and the receive area lies there, behind the export of the live
// rows (which stays in place: peers may still read it):
//   mlx   fp32 [kSplits][2][64] every split's (m, L) of the M tile; the own row written at the export, the
//         peers' rows are pushed (same offset in every CTA)
//   recv  [kSplits - 1][slice] x task_bytes (32, packed 24)  the peers' slices of their O exports (sender
//         order, own skipped)
//   bar   u64 the receive mbarrier (behind the loop's buffers and the receive area; initialised at entry)
//   cs    fp32 [64] the token's cos_sin row, stored with Q for the merge's inverse RoPE (last: no copy lands on
//         it; read from global, its two dependent loads were in every RoPE task's chain)
struct HeadpadSmem {
  int kv, q, p, p_lo, red, ml, valid, oexp, mlx, recv, bar, cs, total;
};

constexpr int kHeadpadSmemLimit = 232448;  // 227 KiB opt-in per CTA (HOPPER_NOTES §7)

// Merge plan of one M tile. Tasks (head hl < live, 8-dim chunk c8), task = hl * 64 + c8, 32 B of the export
// each; with the export's swizzle (oexp_off: XOR of chunk bits 0..2 by head bits) any 8-task-aligned range
// of tasks is one contiguous byte range, so a 32-task-aligned slice moves as one contiguous push.
// push: split s owns push tasks [s * slice, min((s + 1) * slice, push_tasks)) and receives them from its
// peers by st.async pushes. When the receive area for every task does not fit (64 live heads over 5 splits: 4 x
// 832 x 32 B > the ~99 KB behind the export), slice shrinks to what fits and the remaining tail tasks
// [push_tasks, tasks) are merged by DSMEM loads (pull), split s taking [push_tasks + s * tail_slice, ..).
// packed (wgmma keys whose push merge fits every task that way): the export and the slices in the 24-bit
// units of export_pack24.cuh (24 B a task instead of 32), no pulled tail.
struct HeadpadMerge {
  bool push, packed;
  int live, tasks, slice, push_tasks, tail_slice, task_bytes;
};

// The wgmma variant's operand tiles must start 1024-B aligned (SW128 atoms, HOPPER_NOTES §7): the kernel rounds
// its smem base up, so its plan carries 1024 B of slack (the mma variant's tiles need 16 B).
constexpr int headpad_align_slack(int variant) { return variant == kVariantWgmma ? 1024 : 0; }

// `splits`: the CTAs per M tile of the shape planned (0: the key's portable shape, headpad_splits).
constexpr HeadpadMerge headpad_merge(const KeyShape& k, int variant = kVariantMma, int splits = 0) {
  HeadpadMerge g{};
  if (splits == 0) splits = headpad_splits(k);
  g.live = k.live_heads < kHeadpadMTile ? k.live_heads : kHeadpadMTile;
  g.tasks = g.live * (kHeadDim / 8);
  g.push = splits > 1;
  g.slice = ceil_div(ceil_div(g.tasks, splits), 32) * 32;
  g.push_tasks = g.tasks;
  g.tail_slice = 0;
  g.task_bytes = 32;
  if (!g.push) return g;
  // Behind the export (packed: 48 B a head and 16 dims) and mlx: the receive area, the mbarrier and cs.
  const auto room = [&](int task_bytes) {
    const int behind = g.live * kHeadDim / 8 * task_bytes + splits * 2 * kHeadpadMTile * 4;
    return kHeadpadSmemLimit - headpad_align_slack(variant) - 16 - 256 - behind;
  };
  if (variant == kVariantWgmma && (splits - 1) * g.slice * 24 <= room(24)) {
    g.packed = true;
    g.task_bytes = 24;
    return g;
  }
  if ((splits - 1) * g.slice * 32 > room(32)) {
    g.slice = room(32) / ((splits - 1) * 32) / 32 * 32;
    g.push_tasks = splits * g.slice;
    g.tail_slice = ceil_div(ceil_div(g.tasks - g.push_tasks, splits), 32) * 32;
  }
  return g;
}

constexpr HeadpadSmem headpad_smem(const KeyShape& k, int variant = kVariantMma, int splits = 0) {
  if (splits == 0) splits = headpad_splits(k);
  HeadpadSmem m{};
  m.kv = 0;
  m.q = m.kv + 2 * kHeadpadChunk * kHeadpadRowBytes;
  m.p = m.q + kHeadpadMTile * kHeadpadRowBytes;
  m.p_lo = m.p + kHeadpadMTile * kHeadpadChunk * 2;
  m.red = m.p_lo + kHeadpadMTile * kHeadpadChunk * 2;
  m.ml = m.red + 2 * kHeadpadMTile * 4;
  m.valid = m.ml + 2 * kHeadpadMTile * 4;
  m.oexp = m.kv;
  m.total = m.valid + 2 * kHeadpadChunk * 4;
  const HeadpadMerge g = headpad_merge(k, variant, splits);
  m.mlx = m.oexp + g.tasks * g.task_bytes;
  m.recv = m.mlx + splits * 2 * kHeadpadMTile * 4;
  if (g.push) {  // the mbarrier lives through the whole kernel: behind the loop's plan and the receive area
    const int recv_end = m.recv + (splits - 1) * g.slice * g.task_bytes;
    m.bar = recv_end > m.total ? recv_end : m.total;
    m.total = m.bar + 16;
  }
  m.cs = m.total;
  m.total = m.cs + 64 * 4 + headpad_align_slack(variant);
  return m;
}

constexpr bool headpad_key_supported(const KeyShape& k) {
  const bool heads = k.live_heads == 8 || k.live_heads == 16 || k.live_heads == 32 || k.live_heads == 64 ||
                     k.live_heads == 128;
  // Any power-of-two page works (slot / P, slot % P, and P*D, P*S keep 16-B row alignment): 32/64/128 in
  // V4.1, and 1-slot pages for V4's ratio-128 compressed caches.
  const auto page_ok = [](int p) { return p >= 1 && p <= 1024 && (p & (p - 1)) == 0; };
  return heads && k.window > 0 && k.swa_format != kFormatNone && page_ok(k.swa_page) &&
         (k.topk == 0) == (k.comp_format == kFormatNone) && k.topk <= 2048 &&
         (k.topk == 0 || page_ok(k.comp_page)) &&
         (k.q_layout == kQLayoutPlain || k.q_layout == kQLayoutChunk16) &&
         (k.out_layout == kOutMxfp8Ofused || k.out_layout == kOutBf16);
}

// grid.x = T * cluster (one cluster per decode token), 256 threads, dynamic smem as planned.
// With a wide shape the one launch size (all CTAs of a launch get the same smem) is the larger plan's.
constexpr LaunchPlan headpad_plan(const KeyShape& k, int variant) {
  const int wide = headpad_wide_splits(k, variant);
  const int smem = headpad_smem(k, variant).total;
  const int wide_smem = wide > 0 ? headpad_smem(k, variant, wide).total : 0;
  return LaunchPlan{kHeadpadThreads, headpad_cluster(k), headpad_cluster(k), smem > wide_smem ? smem : wide_smem, wide, 0,
                    0, 0};
}

// 1 CTA per SM, <= 227 KiB (HOPPER_NOTES §7); the fp32 O export fits in the aliased KV buffers.
// SWA-only keys (2 chunks): two one-chunk CTAs and a push merge, every task pushed.
constexpr KeyShape kHeadpadSwa32{32, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 1, 2};
static_assert(headpad_smem(kHeadpadSwa32).total <= kHeadpadSmemLimit, "headpad smem within the 227 KiB opt-in limit");
static_assert(headpad_smem(kHeadpadSwa32).total == 214800 && headpad_merge(kHeadpadSwa32).push_tasks == 2048,
              "headpad smem plan");
// The push merge's receive areas (headpad_merge). 64 heads over 5 splits (V4.1-Flash compressed layer):
// slices of 768 tasks (3 per thread) pushed, the last 256 tasks (heads 60..63) pulled, 64 per split.
constexpr KeyShape kHeadpadFlash64{64, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1};
static_assert(headpad_merge(kHeadpadFlash64).push && headpad_merge(kHeadpadFlash64).slice == 768 &&
              headpad_merge(kHeadpadFlash64).push_tasks == 3840 && headpad_merge(kHeadpadFlash64).tail_slice == 64);
static_assert(headpad_smem(kHeadpadFlash64).total == 232208, "headpad smem plan, 64 heads x 5 splits");
// wgmma: packed slices (24 B a task, export_pack24.cuh): every task pushed, no pulled tail.
static_assert(headpad_smem(kHeadpadFlash64, kVariantWgmma).total <= kHeadpadSmemLimit &&
              headpad_merge(kHeadpadFlash64, kVariantWgmma).packed &&
              headpad_merge(kHeadpadFlash64, kVariantWgmma).push_tasks == 4096);
// 128 heads, 2 M tiles x 4 splits: every task pushed (slices of 1024).
static_assert(headpad_merge(KeyShape{128, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 128, 2, 1}).push_tasks == 4096);
static_assert(headpad_smem(KeyShape{128, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 128, 2, 1}).total <=
              kHeadpadSmemLimit);
static_assert(kHeadpadMTile * kHeadDim * 4 <= 2 * kHeadpadChunk * kHeadpadRowBytes, "O export aliases kv");
// V4.1-Flash compressed layer (128 + 512): 10 chunks -> 5 CTAs; V4-Pro (128 + 1024) at 128 heads: 2 M tiles
// x 4 splits; SWA-only 128: two one-chunk CTAs (kHeadpadOneChunkMaxCluster).
static_assert(headpad_cluster(KeyShape{64, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}) == 5);
static_assert(headpad_cluster(KeyShape{128, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 128, 2, 1}) == 8);
static_assert(headpad_splits(KeyShape{128, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 128, 2, 1}) == 4);
static_assert(headpad_cluster(KeyShape{16, 128, 2048, kFormatV41Fp8, kFormatV41Fp8, 64, 32, 1, 2}) == 8);
static_assert(headpad_cluster(KeyShape{32, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 1, 2}) == 2);
static_assert(headpad_plan(KeyShape{64, 128, 512, kFormatV4Fp8, kFormatV4Fp8, 64, 64, 2, 1}, kVariantMma)
                  .threads == kHeadpadThreads);

}  // namespace swapjit
