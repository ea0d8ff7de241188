// swapab_traits.cuh: compile-time constants and the shared-memory plan of the swap-AB decode kernel
// (docs/swapab-design.md). Plain host C++20 as well as device code: the host calls swapab_plan() to size
// the launch (jit/kernel_family.cpp), the kernel calls the same functions, so no number is written twice.
// NOTE: no CUDA headers and no device code in this file.
#pragma once
#include "key_shape.cuh"

namespace swapjit {

// 16 warps (4 per scheduler): every phase is a dependent chain (loads, MMA accumulators, barriers) and
// with 2 warps per scheduler the H200 issued one instruction per ~10 cycles (ncu, docs/perf-notes.md);
// the kernel fits the 128 registers a thread may have at 512 threads, one CTA per SM.
constexpr int kSwapabThreads = 512;
constexpr int kSwapabWarps = kSwapabThreads / 32;
constexpr int kSwapabSwaTile = 64;      // SWA slots per CTA
constexpr int kSwapabCompTile = 128;    // compressed slots per CTA
constexpr int kSwapabMaxCluster = 8;    // portable cluster limit (HOPPER_NOTES §5)
constexpr int kSwapabKvRowBytes = kHeadDim * 2;  // one bf16 row of the KV tile: 1024 B = 64 chunks of 16 B

constexpr int kSwapabWideCompTile = 64;  // compressed slots per CTA under wide tiling
constexpr int kSwapabMaxWideCluster = 16;  // non-portable cluster limit of sm_90 (HOPPER_NOTES §5)

constexpr int swapab_swa_tiles(const KeyShape& k) { return ceil_div(k.window, kSwapabSwaTile); }
constexpr int swapab_comp_tiles(const KeyShape& k) { return k.topk > 0 ? ceil_div(k.topk, kSwapabCompTile) : 0; }
constexpr int swapab_cluster(const KeyShape& k) { return swapab_swa_tiles(k) + swapab_comp_tiles(k); }
// Wide tiling (docs/swapab-design.md): at small T most SMs are idle, and the compressed CTAs (128 slots)
// finish ~2.3 us after the SWA CTAs (64) (swapjit timeline). With 64-slot compressed tiles every CTA has
// an SWA CTA's work, in a cluster of up to 16 CTAs (non-portable: 7 such clusters fit the H200 at once, so
// only steps of few tokens take it; the launcher decides from the occupancy). The wgmma variant only (the
// one that runs on sm_90a); 0 = the key has no wide shape.
constexpr int swapab_wide_cluster(const KeyShape& k, int variant) {
  if (variant != kVariantWgmma || k.topk <= 0) return 0;
  const int c = swapab_swa_tiles(k) + ceil_div(k.topk, kSwapabWideCompTile);
  return c > swapab_cluster(k) && c <= kSwapabMaxWideCluster ? c : 0;
}
// Mid tiling: between the wide shape's reach (7 tokens on the H200) and the portable one's 128-slot
// compressed tiles, compressed tiles of 96 slots in a portable cluster of up to 8 (V4.1-Flash: 2 SWA + 6
// compressed CTAs, rebalanced to 80 rows each: swapab_shape.cuh, swapab_swa_extra), for the steps whose
// clusters are all resident at once (the loader decides from the occupancy, as for the wide shape). A 96-slot
// tile is two m64 tiles, the second part used: the gather, the softmax and O^T's K shrink with the rows, S^T
// does not. Needs whole slots per softmax thread (its threads per head, min(kSwapabThreads / heads, 32),
// dividing 96); wgmma only; 0 = none.
constexpr int kSwapabMidCompTile = 96;
constexpr int swapab_mid_cluster(const KeyShape& k, int variant) {
  if (variant != kVariantWgmma || k.topk <= 0 || k.live_heads <= 0) return 0;
  const int tph = kSwapabThreads / k.live_heads < 32 ? kSwapabThreads / k.live_heads : 32;
  if (kSwapabMidCompTile % tph != 0) return 0;
  const int c = swapab_swa_tiles(k) + ceil_div(k.topk, kSwapabMidCompTile);
  return c > swapab_cluster(k) && c <= kSwapabMaxCluster ? c : 0;
}
// All CTAs of a launch get the same dynamic smem, so a mixed cluster is sized for the larger tile.
constexpr int swapab_tile_alloc(const KeyShape& k) { return k.topk > 0 ? kSwapabCompTile : kSwapabSwaTile; }
// The plan's slack for rounding the dynamic smem base up to 1024 B (SW128 atoms; dc::align_smem_1024).
constexpr int kSwapabAlignSlack = 1024;

// Shared-memory plan (bytes, offsets from the dynamic smem base rounded up to 1024 B in the kernel, so
// `total` carries kSwapabAlignSlack). Matrices of R rows x 512 bf16 are stored "block-major SW128": 8
// dim-blocks of 64 dims, block b at b * R * 128, row r's 128 B at r * 128 inside it, its 16-B chunk cc at
// cc ^ (r & 7). That is the canonical 128B-swizzle K-major layout of wgmma (HOPPER_NOTES §1.3-1.4), and
// the same bytes read as MN-major give KV^T; ldmatrix reads it conflict-free too. The SW128 regions (kv,
// q, p_hi, p_lo) must start at a multiple of 1024 B: the hardware swizzle XORs address bits [4:6] with bits
// [7:9] (descriptor base offset 0), so an atom starting at 512 mod 1024 reads row r's chunks XORed with
// (r + 4) & 7 instead of r & 7. kv and q sizes are multiples of 1024 for H >= 8, NS >= 64, but the wgmma
// score rows are 1088 H B: 8.5 KiB at H = 8, so p_hi is rounded up to the next 1024 B (static_asserts below).
//   kv     bf16 [NS][512]    block-major SW128, R = NS (A of S^T; A^T of O^T)
//   q      bf16 [H][512]     block-major SW128, R = H (RoPE'd Q, B operand of S^T)
//   s      fp32              mma: [H][NS] scaled scores, -inf for unused slots; wgmma: [256/ns][H][ns]
//                            raw partial scores of the K quarters / halves (ns = the CTA's tile)
//   p_hi   bf16 [2H][NS]     P_hi (rows 0..H-1) and P_lo (rows H..2H-1) as ONE block-major SW128 matrix
//   p_lo                     over slots (64-slot blocks), R = 2H: the wgmma O^T reads both as one N = 2H
//                            B operand (the KV tile, its A, is read once, not once per half); p_lo is the
//                            address of row H in block 0, so either base with R = 2H addresses its half
//   ml     fp32 [2][H]       this CTA's (m_c, L_c) per head; read by peers over DSMEM
//   sid    i32  [NS]         this tile's slot ids, -1 = unused entry
//   wts    fp32 [H][C]       merge weights exp(m_r - M) of each rank r (0 for an empty part)
//   den    fp32 [H]          merge denominator incl. the sink, 0 when every part is empty
//   cs     fp32 [64]         the token's cos_sin row (inverse RoPE in the epilogue)
//   sink   fp32 [H]          the attention sink per head (-inf without one), loaded with Q: read from global
//                            in the merge, its latency was the longest step of the merge's chain (SASS)
//   oexp   fp32 [H][512]     O^T partial for the merge. wgmma: ALIASES q and s, dead after the softmax (q: H KB,
//                            s: 1088 H B >= the export's 2 KB a head), so each warpgroup stores its part as soon
//                            as its own O^T retires, while the others' still read the KV tile (the export
//                            used to wait for the last warpgroup: swapjit timeline, session 6); the push
//                            merge's receive area then lies in the dead KV tile. mma: ALIASES kv (written
//                            after the last MMA; its score rows are too short to hold the export)
//   recv   (wgmma, 8 and 16 heads) the push merge's receive area, its own: [C][slice tasks] x 12 B of packed
//          slices, then [C][2][H] fp32 (m, L) rows, for the key's largest cluster. Elsewhere the receive area
//          lies in the KV tile, dead only once every peer passed the publishing cluster barrier.
struct SwapabSmem {
  int kv, q, s, p_hi, p_lo, ml, sid, wts, den, cs, sink, oexp, recv, total;
};

// The push merge's slices (swapab_merge.cuh MergePlan) for H heads in a cluster of C: tasks of 4 dims when
// 8-dim tasks would leave at least half of a CTA's threads idle (else 8), each rank's slice a whole number of
// warps of tasks. Here so that the smem plan can size a receive area of its own.
constexpr int swapab_merge_task_dims(int h, int c) {
  return ceil_div(h * (kHeadDim / 8), c) <= kSwapabThreads / 2 ? 4 : 8;
}
constexpr int swapab_merge_slice_tasks(int h, int c) {
  return ceil_div(ceil_div(h * (kHeadDim / swapab_merge_task_dims(h, c)), c), 32) * 32;
}
// A receive area's bytes: C slices (packed: 3 B a value) and C (m, L) rows of 2 H fp32.
constexpr int swapab_recv_bytes(int h, int c, bool packed) {
  return c * swapab_merge_slice_tasks(h, c) * swapab_merge_task_dims(h, c) * (packed ? 3 : 4) + c * 2 * h * 4;
}
// Whether the push merge has a receive area of its own (wgmma, at most 16 heads: 16-28 KB; 32 heads' 52 KB do not
// fit), so that a CTA pushes its slices once its own export is stored, without the publishing cluster barrier
// that waited for the slowest peer's GEMMs (their KV tiles held the receive areas).
constexpr bool swapab_own_recv(const KeyShape& k, int variant) { return variant == kVariantWgmma && k.live_heads <= 16; }

// The wgmma variant splits S^T's K (512 dims) over the warpgroups that share an m64 tile: 4 quarters for
// a 64-slot tile, 2 halves for 96 or 128 slots, so every tile keeps all 4 warpgroups busy; the partial sums
// are stored and added in fixed order by the softmax. A part's row of one head holds the tile's ns slots
// plus 4 floats of padding: an accumulator register holds, across a warp, heads h0 + 2 j (j = 0..3) at 8
// consecutive slots, and with rows of ns floats (a multiple of 32) the four heads fell on the same 8
// banks (4-way conflicts: 0.29 us of S^T's 0.93 at 16 heads; swapjit timeline, session 6). With ns + 4
// they are 8 banks apart.
constexpr int swapab_score_row(int ns) { return ns + 4; }
// Score floats per head: the most any tile needs (64 slots: 4 parts of 68).
constexpr int kSwapabWgmmaScoreRows = 4 * swapab_score_row(64);
static_assert(2 * swapab_score_row(128) <= kSwapabWgmmaScoreRows && 2 * swapab_score_row(96) <= kSwapabWgmmaScoreRows);

constexpr SwapabSmem swapab_smem(const KeyShape& k, int variant) {
  const int ns = swapab_tile_alloc(k);
  const int h = k.live_heads;
  SwapabSmem m{};
  m.kv = 0;
  m.q = m.kv + ns * kSwapabKvRowBytes;
  m.s = m.q + h * kSwapabKvRowBytes;
  m.p_hi = ceil_div(m.s + h * (variant == kVariantWgmma ? kSwapabWgmmaScoreRows : ns) * 4, 1024) * 1024;  // SW128 atom
  m.p_lo = m.p_hi + h * 128;
  m.ml = m.p_hi + 2 * h * ns * 2;
  m.sid = m.ml + 2 * h * 4;
  m.wts = m.sid + ns * 4;
  m.den = m.wts + h * swapab_cluster(k) * 4;
  m.cs = m.den + h * 4;
  m.sink = m.cs + 64 * 4;
  m.oexp = variant == kVariantWgmma ? m.q : m.kv;
  m.recv = ceil_div(m.sink + h * 4, 16) * 16;
  int recv = 0;  // the largest of the key's clusters' receive areas (portable, wide, mid)
  if (swapab_own_recv(k, variant)) {
    const int cs[3] = {swapab_cluster(k), swapab_wide_cluster(k, variant), swapab_mid_cluster(k, variant)};
    for (int c : cs) {
      if (c > 1 && swapab_recv_bytes(h, c, true) > recv) recv = swapab_recv_bytes(h, c, true);
    }
  }
  m.total = (recv > 0 ? m.recv + recv : m.sink + h * 4) + kSwapabAlignSlack;
  return m;
}

constexpr bool swapab_key_supported(const KeyShape& k) {
  return (k.live_heads == 8 || k.live_heads == 16 || k.live_heads == 32) && k.window > 0 && k.swa_format != kFormatNone &&
         (k.topk == 0) == (k.comp_format == kFormatNone) && swapab_cluster(k) <= kSwapabMaxCluster &&
         (k.swa_page & (k.swa_page - 1)) == 0 && k.swa_page > 0 &&
         (k.topk == 0 || ((k.comp_page & (k.comp_page - 1)) == 0 && k.comp_page > 0)) &&
         (k.q_layout == kQLayoutPlain || k.q_layout == kQLayoutChunk16) &&
         (k.out_layout == kOutMxfp8Ofused || k.out_layout == kOutBf16);
}

// grid.x = T * cluster, one cluster per decode token, one CTA per tile.
constexpr LaunchPlan swapab_plan(const KeyShape& k, int variant) {
  return LaunchPlan{kSwapabThreads, swapab_cluster(k), swapab_cluster(k), swapab_smem(k, variant).total,
                    swapab_wide_cluster(k, variant), 0, swapab_mid_cluster(k, variant), 0};
}

// The plan's numbers for the V4.1-Flash compressed key (HOPPER_NOTES §7 budget): 2 + 4 CTAs, < 227 KiB.
static_assert(swapab_cluster(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}) == 6);
static_assert(swapab_smem(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}, kVariantMma).total == 199680);
static_assert(swapab_smem(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}, kVariantWgmma).total ==
              218112);
static_assert(swapab_smem(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}, kVariantWgmma).total <=
              232448);
static_assert(swapab_wide_cluster(KeyShape{16, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantWgmma) == 10);
static_assert(swapab_wide_cluster(KeyShape{16, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantMma) == 0);
static_assert(swapab_wide_cluster(KeyShape{16, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}, kVariantWgmma) == 0);
static_assert(swapab_mid_cluster(KeyShape{16, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantWgmma) == 8);
static_assert(swapab_mid_cluster(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}, kVariantWgmma) == 8);
static_assert(swapab_mid_cluster(KeyShape{16, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantMma) == 0);
static_assert(swapab_mid_cluster(KeyShape{16, 128, 768, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantWgmma) == 0);
// Every SW128 operand region starts on a 1024-B atom boundary, for every head count and tile size (at 8 heads
// the wgmma score rows, 1088 x 8 B, used to leave P at 512 mod 1024: P read with the wrong swizzle phase).
constexpr bool swapab_sw128_aligned(const KeyShape& k, int variant) {
  const SwapabSmem m = swapab_smem(k, variant);
  return m.kv % 1024 == 0 && m.q % 1024 == 0 && m.p_hi % 1024 == 0 && m.p_lo % 1024 == 0;
}
static_assert(swapab_sw128_aligned(KeyShape{8, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{8, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{16, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{16, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{32, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}, kVariantWgmma) &&
              swapab_sw128_aligned(KeyShape{8, 128, 512, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}, kVariantMma) &&
              swapab_sw128_aligned(KeyShape{8, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}, kVariantMma),
              "SW128 regions (kv, q, P) on 1024-B atom boundaries");
// The fp32 O^T export must fit in what it aliases, for every tile size and head count: the KV tile (mma),
// or Q and the scores, contiguous (wgmma).
static_assert(32 * kHeadDim * 4 <= kSwapabSwaTile * kSwapabKvRowBytes);
static_assert(kHeadDim * 4 <= kSwapabKvRowBytes + kSwapabWgmmaScoreRows * 4, "a head's export row fits its Q and score rows");

}  // namespace swapjit
