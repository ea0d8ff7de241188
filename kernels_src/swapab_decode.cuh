// swapab_decode.cuh: the swap-AB sparse decode attention kernel (SPEC.md §3.2; docs/swapab-design.md).
// KV slots sit on the MMA M side and the 16 or 32 live heads on N, so no head padding is computed.
// One thread-block cluster per decode token, one CTA per tile of the token's lists: ceil(window/64) SWA
// tiles of 64 slots, then ceil(topk/128) compressed tiles of 128 slots. Each CTA computes an unnormalised
// partial (m_c, L_c, O_c) per head; the cluster merges them over distributed shared memory in FIXED rank
// order (no atomics, SPEC §3.3), adds the sink once, and writes the output. One launch per step.
// The tile's two GEMMs: variant "wgmma" (sm_90a, swapab_tile_wgmma.cuh) or "mma" (mma.sync + ldmatrix,
// any sm_90+, swapab_tile_mma.cuh); the gather and the softmax: swapab_gather_softmax.cuh (and the fused gather of
// 64-row wgmma tiles, swapab_gather_scores.cuh); the merge: swapab_merge.cuh. Everything else is here.
// NOTE: compiled by NVRTC after the prelude that defines kKey and kVariant (see DESIGN.md conventions).
#pragma once
#include "swapab_gather_scores.cuh"  // instantiated only by wgmma (sm_90a) keys
#include "swapab_gather_softmax.cuh"
#include "swapab_merge.cuh"
#include "swapab_shape.cuh"
#include "swapab_tile_mma.cuh"
#include "swapab_tile_wgmma.cuh"  // instantiated only by wgmma (sm_90a) keys

namespace swapjit {
namespace swapab {

// Calls f(TileKind<swa, NS>{}) with this CTA's list and tile size as compile-time constants (64 slots for
// an SWA tile; CompNS, 128 or 64 under wide tiling, for a compressed one), so each per-tile step is
// instantiated once per tile kind and an SWA-only key never instantiates the compressed one.
// The rows the gather writes for a tile that computes `ns` rows (whole item pairs: a multiple of 32): a
// rebalanced compressed CTA's 112 entries are gathered as 128 rows (16 unused, zero) but computed as 112 (7 k16
// steps of O^T instead of 8); a balanced mid tile's 80 as 96. The slot-id fill covers these rows.
constexpr int gather_rows(int ns) { return (ns + 31) / 32 * 32; }
template <bool Swa, int NS>
struct TileKind {
  static constexpr bool swa = Swa;
  static constexpr int ns = NS;  // the rows the GEMMs and the softmax compute (used entries: rows < ns)
  static constexpr int gather_ns = gather_rows(NS);
};
template <int SwaNS, int CompNS, class F>
__device__ __forceinline__ void for_this_tile(bool is_swa, F f) {
  if (is_swa) {
    f(TileKind<true, SwaNS>{});
  } else if constexpr (kKey.topk > 0) {
    f(TileKind<false, CompNS>{});
  }
}

// The whole kernel for one tiling (swapab_shape.cuh Tiling): C CTAs per token, compressed tiles of CompNS.
template <class Tl>
__device__ __forceinline__ void decode_token(const DecodeParams& p) {
  constexpr int kCluster = Tl::kCluster, kCompNS = Tl::kCompNS;
  constexpr int kSwaNS = Tl::kSwaNS, kSwaExtra = Tl::kSwaExtra, kCompShare = Tl::kCompShare;
  constexpr int kCompRows = Tl::kCompRows;  // a compressed CTA's computed rows (112 when rebalanced)
  constexpr bool kPushMerge = MergePlan<kCluster>::kPush;
  static_assert(kKey.topk == 0 || (kCompNS <= kNSA && kCompNS % 32 == 0),
                "compressed tiles of 64, 96 or 128 slots, within the allocation");
  static_assert(kCluster == swapab_cluster(kKey) || kPushMerge, "the pull merge's weights are sized for the key's cluster");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = dc::align_smem_1024(smem_raw);  // SW128 atoms (HOPPER_NOTES §7)
  unsigned char* kv = smem + kSm.kv;        // bf16 [kNSA][512], block-major SW128
  unsigned char* qs = smem + kSm.q;         // bf16 [kH][512], block-major SW128
  float* s = reinterpret_cast<float*>(smem + kSm.s);      // fp32 scores (swapab_traits.cuh)
  unsigned char* p_hi = smem + kSm.p_hi;    // bf16 P_hi rows of the [2 kH][kNSA] block-major SW128 P
  unsigned char* p_lo = smem + kSm.p_lo;    // its P_lo rows (swapab_traits.cuh)
  float* ml = reinterpret_cast<float*>(smem + kSm.ml);    // fp32 [2][kH]: m_c, L_c
  int* sid = reinterpret_cast<int*>(smem + kSm.sid);      // i32 [kNSA]
  float* oexp = reinterpret_cast<float*>(smem + kSm.oexp);  // fp32 [kH][512], aliases q + s (wgmma) or kv
  float* wts = reinterpret_cast<float*>(smem + kSm.wts);    // fp32 [kH][kCluster] merge weights
  float* den = reinterpret_cast<float*>(smem + kSm.den);    // fp32 [kH] merge denominators
  float* cs_s = reinterpret_cast<float*>(smem + kSm.cs);    // fp32 [64] the token's cos_sin row
  float* sink_s = reinterpret_cast<float*>(smem + kSm.sink);  // fp32 [kH] the sink, -inf without one

  // Timeline builds only: the first point is the kernel's first instruction, so "entry -> dependency wait" holds
  // the work before the wait, which is on a call's path when the previous kernel does not trigger its
  // dependents early (the bench's Q writer, docs/bench.md; perf-notes session 34: a stamp after that work hid it).
  stamp(0);
  // Launch-parameter arithmetic only before the dependency wait.
  const int tid = threadIdx.x;
  const int rank = cluster_rank<kCluster>();
  // The token and the first of this cluster's heads (p.head_groups clusters a token, kH heads each).
  const int cl = blockIdx.x / kCluster;
  // head_groups is 1, 2 or 4 (runtime/decode_attention.cpp): a shift, where the division by a run-time value was
  // ~30 SASS instructions (I2F, MUFU.RCP, F2I and fix-ups) on the chain to the slot ids' address (H200 session 31
  // run 4: swap-AB 0.98-0.99 with the addresses below).
  const int t = cl >> (p.head_groups >> 1);
  const int h0 = (cl & (p.head_groups - 1)) * kH;
  const bool is_swa = rank < kSwaTiles;
  const int ns = is_swa ? kSwaNS : kCompNS;  // the tile's rows (rows past the CTA's entries: unused)
  // Slot ids for every row the gather reads (gather_rows: a balanced mid tiling's 80-row SWA tile reads 96).
  const int sid_rows = is_swa ? gather_rows(kSwaNS) : kCompNS;

  // The push merge's receive barriers (MergePlan::kRecvBarriers): [0] the peers' (m, L) rows, [1] the slices,
  // or staged, [k] the slice of the peer k ranks below (k = 1 .. C - 1). One local arrival each (with the
  // expected bytes) plus the copies' bytes. Initialised before any peer can target them: the cluster barrier
  // after the export orders the two.
  __shared__ alignas(8) cuda::std::uint64_t recv_bar[kSwapabMaxWideCluster];
  // With its own receive area (kOwnRecv) a CTA pushes without the publishing barrier, so the peers learn that
  // its barriers are initialised (and that it has started: HOPPER_NOTES §5) from a cluster barrier whose arrive
  // is here and whose wait is before the first push, ~3 us later: long complete by then.
  constexpr bool kEarlyPush = kPushMerge && kOwnRecv;
  if constexpr (kEarlyPush) {
    // Initialised and armed here by one thread, before any peer may push (program order: racecheck reported
    // the per-thread inits, which ptxas runs as a uniform-datapath loop, against the arming; session 24 run
    // 3). The arrive is relaxed: fence.mbarrier_init.release.cluster is the release that the peers' acquiring
    // barrier.cluster.wait pairs with (the init idiom of the PTX ISA and CUTLASS), and the arming needs no
    // order against a peer's bytes (a phase may see its bytes before its expectation; it cannot complete
    // before this arrive-on). The release form (its MEMBAR) measured ~3 % a call slower (session 25 run 1).
    if (tid == 0) {
      for (int k = 0; k < MergePlan<kCluster>::kRecvBarriers; ++k) cuda::ptx::mbarrier_init(&recv_bar[k], 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
      arm_receive_all<kCluster>(rank, recv_bar);
    }
    dc::cluster_arrive_relaxed();
  } else if constexpr (kPushMerge) {
    static_assert(MergePlan<kCluster>::kRecvBarriers <= kSwapabMaxWideCluster);
    if (tid < MergePlan<kCluster>::kRecvBarriers) {
      cuda::ptx::mbarrier_init(&recv_bar[tid], 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
  }
  // The pushes' peers, remote ends and bytes (push merge only; swapab_merge.cuh plan_pushes): launch-parameter
  // arithmetic, so worked out here, before the dependency wait, where it overlaps a previous kernel that triggers
  // its dependents early (PDL). After the export its ~60 SASS instructions a thread were on the path to the first
  // st.async. H200 session 35 run 1: with a triggering Q writer (`bench --pdl-producer`) the 16-head key's rows
  // 0.979-0.995 a call, the rest 0.99-1.01; with the bench's plain writer (nothing to overlap) 1.002 / 1.004, the
  // head-padded control 1.002. Early-push keys whose softmax leaves whole warps idle (8 heads: warps 8-15;
  // kIdlePush) push from those warps alone: 8 pushing warps pay a warp's slow first st.async where 16 did
  // (session 34: 16 pushing warps 2-4 % slower, 4 or 2 1-4 % slower; the 16- and 32-head keys, network-bound,
  // tie at 8 and 16).
  constexpr int kSoftmaxThreads = kH * kTPH;
  constexpr bool kIdlePush = kEarlyPush && kSoftmaxThreads <= kSwapabThreads / 2;  // kEarlyPush: C > 1
  constexpr int kPushBase = kIdlePush ? kSoftmaxThreads : 0;
  const dc::PushPlan pushes = plan_pushes<kCluster, kPushBase>(smem, rank, recv_bar);

  // Row tid's slot id and list length: their addresses are launch-parameter arithmetic, worked out here, so that
  // after the wait a thread issues its two loads at once (computed after it, they were ~20 SASS instructions
  // and two dependent constant-bank loads, the width and the list's base, on every call's first round trip).
  // Entry j of the SWA list (row_swa) or of the compressed list, used iff row_in. Without rebalancing (the wide
  // and mid tilings, SWA-only keys) every row of a SWA CTA is a SWA entry and every row of a compressed CTA a
  // compressed one, in the plain form (the general one cost 0.5-1 % at T <= 4, session 15 run 10). Rebalanced: a
  // SWA CTA's rows 64.. are compressed entries kSwaExtra rank + tid - 64; a compressed CTA's rows are entries
  // kSwaTiles kSwaExtra + kCompShare (rank - kSwaTiles) + tid, used below kCompShare. id_at: null where the entry
  // lies past the list's width (no id to load).
  bool row_in = true;
  int j = 0;
  const int* id_at = nullptr;
  const int* len_at = nullptr;
  if (tid < sid_rows) {
    bool row_swa = is_swa;
    j = (is_swa ? rank * kSwapabSwaTile : (rank - kSwaTiles) * kCompNS) + tid;
    if constexpr (kSwaExtra > 0) {
      row_swa = is_swa && tid < kSwapabSwaTile;
      j = row_swa  ? rank * kSwapabSwaTile + tid
          : is_swa ? rank * kSwaExtra + tid - kSwapabSwaTile
                   : kSwaTiles * kSwaExtra + (rank - kSwaTiles) * kCompShare + tid;
      row_in = is_swa ? tid < kSwaNS : tid < kCompShare;
    }
    if (row_swa) {
      if (j < min(kKey.window, p.swa_width)) id_at = p.swa_slots + static_cast<i64>(t) * p.swa_width + j;
      len_at = p.swa_lens + t;
    } else if constexpr (kKey.topk > 0) {
      if (row_in && j < min(kKey.topk, p.comp_width)) id_at = p.comp_slots + static_cast<i64>(t) * p.comp_width + j;
      len_at = p.comp_lens + t;
    }
  }
  asm volatile("" : "+l"(id_at), "+l"(len_at), "+r"(j));  // computed here, not sunk past the wait

  dc::grid_dependency_wait();
  // Dependents may launch now: their own griddepcontrol.wait waits for this whole grid (as kv_insert).
  dc::launch_dependents();
  stamp(1);

  // 1. The tile's slot ids (entry j used iff j < min(len, width) and slot >= 0), and Q's loads. The id and
  // the length are loaded side by side (the id's bound is the list width, a launch parameter), not the id
  // behind the length: one global round trip, not two. ld.global by hand: the addresses came through the asm
  // above, which leaves them generic to the compiler.
  // Predicated loads first, outside the branch that stores the row (a branch here let ptxas put Q's address
  // arithmetic ahead of them).
  int id = -1, len = 0;
  asm volatile("{\n.reg .pred p;\nsetp.ne.u64 p, %1, 0;\n@p ld.global.s32 %0, [%1];\n}" : "+r"(id) : "l"(id_at) : "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.u64 p, %1, 0;\n@p ld.global.s32 %0, [%1];\n}" : "+r"(len) : "l"(len_at) : "memory");
  if (tid < sid_rows) sid[tid] = row_in && j < len && id >= 0 ? id : -1;
  // Q's loads go out now; its RoPE (which waits for positions -> cos_sin, two round trips) and stores run
  // while the records are in flight (gather_tile's `between`): only the slot ids gate the first barrier.
  constexpr int kQItems = kH * 64 / kSwapabThreads;  // 1, 2 or 4 chunks of 8 dims per thread
  uint4 qv[kQItems];
  if (dc::q_chunks_aligned(p)) {
    // One uniform test, then a thread's items (one chunk, heads 8 apart: q_item_head) at compile-time offsets
    // from one address. Tested per chunk, each item had its own address and a predicated 2-B fallback (~40 SASS
    // instructions at 32 heads ahead of the first barrier).
    static_assert(kSwapabThreads == 512, "item i of a thread: head + 8 i, the same chunk");
    constexpr int kItemStep = 8 * (kKey.q_layout == kQLayoutChunk16 ? 16 : kHeadDim) / 8;  // in 16-B units
    const uint4* src = reinterpret_cast<const uint4*>(dc::q_chunk8_src(p, t, h0 + q_item_head(tid), q_item_chunk(tid)));
#pragma unroll
    for (int i = 0; i < kQItems; ++i) qv[i] = src[i * kItemStep];
  } else {
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const int it = tid + i * kSwapabThreads;
      qv[i] = dc::q_load_chunk8(p, t, h0 + q_item_head(it), q_item_chunk(it));
    }
  }
  // The token's cos / sin row: read only by the threads with a rotated Q chunk (dims 448..; wgmma: warps 14-15)
  // and by those that copy it for the merge. The others do not load the position, so fewer requests go out
  // beside the slot ids, whose round trip starts every call's critical path (more requests there made it
  // ~250 ns longer: docs/experiments/swapab-fused-own-ids.patch, session 26).
  const bool reads_cs = q_item_chunk(tid) * 8 >= kNoRopeDims || tid >= kSwapabThreads - 64;
  const float* cs = reads_cs ? dc::cos_sin_row(p, t) : nullptr;
  // The sink in base-2 units, as the scores (stored in `between` below).
  const float sink = tid < kH && p.sink != nullptr ? p.sink[h0 + tid] * dc::kLog2e : kNegInf;
  __syncthreads();
  stamp(2);

  // 2. Gather + exact dequant of the tile into smem (bf16), Q with RoPE between the loads and the decode.
  const auto q_rope_store = [&](auto parts) {  // parts: Index<kParts> (0: Q's dims unpermuted)
    if (tid >= kSwapabThreads - 64) cs_s[tid - (kSwapabThreads - 64)] = cs[tid - (kSwapabThreads - 64)];
    if (tid < kH) sink_s[tid] = sink;
    const unsigned q_base = dc::smem_addr(qs);
    // A thread's Q items: one chunk c, heads h + 8 i (so the rows' swizzle is the same: 1 KB apart unpermuted).
    static_assert(kSwapabThreads == 512, "a thread's Q chunks share c = q_item_chunk(tid), heads 8 apart");
    const int h = q_item_head(tid), c = q_item_chunk(tid);
    const dc::RopeCoefs rope = dc::rope_coefs(c, cs);
#pragma unroll
    for (int i = 0; i < kQItems; ++i) {
      const uint4 v = dc::q_rope_chunk8(qv[i], c, rope);
      if constexpr (decltype(parts)::value > 0) {
        q_store_permuted<decltype(parts)::value>(q_base, h + 8 * i, c, v);
      } else {
        asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(q_chunk_addr(q_base, h, c) + 8 * 128 * i),
                     "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                     : "memory");
      }
    }
  };
  const unsigned kv_base = dc::smem_addr(kv), q_base = dc::smem_addr(qs);
  // Scores in base 2: z = sm_scale * log2(e) * <q, k>, p = exp2(z - m); m_c and the sink in the same units, so
  // the merge's weights are exp2 too. exp2f is ~4 SASS instructions where expf was ~8, in a phase every warp
  // runs (~200 instructions a tile kind at 32 heads; with Q's single address below, H200 session 30 run 2:
  // swap-AB compressed 0.984 / 0.977 at 16 / 32 heads).
  const float zscale = p.sm_scale * dc::kLog2e;
  const unsigned phi_base = dc::smem_addr(p_hi), plo_base = dc::smem_addr(p_lo);
  // 2 + 3. Gather + exact dequant of the tile (bf16, into smem), Q with RoPE between the loads and the decode
  // (gather_tile's `between`), then the raw scores S^T.
  for_this_tile<kSwaNS, kCompRows>(is_swa, [&](auto tile) {
    constexpr bool kSwa = decltype(tile)::swa;
    constexpr int kNS = decltype(tile)::gather_ns;
    // A rebalanced SWA tile's rows 64.. are compressed records (kSwaExtra).
    constexpr bool kMixed = kSwa && kNS > kSwapabSwaTile;
    constexpr int kFmtA = kSwa ? kKey.swa_format : kKey.comp_format, kPA = kSwa ? kKey.swa_page : kKey.comp_page;
    constexpr int kRowsA = kMixed ? kSwapabSwaTile : kNS, kFmtB = kMixed ? kKey.comp_format : kFmtA;
    constexpr int kPB = kMixed ? kKey.comp_page : kPA;
    const CacheView& cache = kSwa ? p.swa_cache : p.comp_cache;
    if constexpr (kWgmma && kNS == 64) {
      // S^T's A fragments straight from the decode (swapab_gather_scores.cuh). 64-row tiles only: in 96- and
      // 128-row tiles the fragment mapping left the gather slower than S^T gained (T = 4 1.04-1.11, T = 16
      // 1.01-1.04; 64-row tiles 0.96-0.99; session 20 run 5).
      gather_scores_wgmma<kFmtA, kPA, decltype(tile)::ns>(cache, sid, kv, q_base, s, q_rope_store);
    } else {
      gather_tile<kFmtA, kPA, kNS, kRowsA, kFmtB, kPB>(cache, p.comp_cache, sid, kv, q_rope_store);
      if constexpr (kWgmma) wg::fence_operand_stores();  // KV and Q (generic st.shared) before the wgmmas
      __syncthreads();
      stamp(3);
      stamp_warp_spread(22, 23);  // timeline builds only: the slowest and the fastest warp's gather
      if constexpr (kWgmma) {
        scores_wgmma<decltype(tile)::ns>(kv_base, q_base, s);
      } else {
        scores(ns, zscale, kv_base, q_base, sid, s);  // scaled and masked
      }
    }
  });
  __syncthreads();
  stamp(4);
  for_this_tile<kSwaNS, kCompRows>(is_swa,
                         [&](auto tile) { softmax_tile<decltype(tile)::ns>(sid, s, zscale, p_hi, p_lo, ml); });
  // kIdlePush keys: every thread takes the start barrier's wait (its acquire's L1 invalidate) before barrier 4,
  // so after the export only a CTA barrier stands before the first st.async (H200 session 33 run 3: 16 heads
  // T <= 4 0.965-0.977 a call with the idle warps pushing). Where the wait sits made no difference (sessions
  // 33-34), but with the softmax warps' wait behind a later CTA barrier than the pushers', compute-sanitizer's
  // racecheck never returned (session 33 run 2).
  if constexpr (kIdlePush) dc::cluster_wait();
  stamp_warp();  // timeline builds only
  if constexpr (kWgmma) wg::fence_operand_stores();  // P and the KV tile (generic st.shared) before O^T
  __syncthreads();
  stamp(5);
  stamp_warp_spread(24, 25);  // timeline builds only: the slowest and the fastest warp's softmax
  if constexpr (kWgmma) {
    for_this_tile<kSwaNS, kCompRows>(is_swa,
                           [&](auto tile) {
                             values_export_wgmma<decltype(tile)::ns, MergePlan<kCluster>::kPacked>(kv_base, phi_base, oexp);
                           });
  } else {
    values_export(ns, kv_base, phi_base, plo_base, oexp);
  }
  stamp(6);
  if constexpr (!kEarlyPush) arm_receive<kCluster>(rank, recv_bar);
  if constexpr (kEarlyPush) {
    // Own receive areas: the export needs a CTA barrier before the pushing threads read it, and the peers'
    // barriers were initialised before the start barrier (its arrive at the top); nothing waits for the peers'
    // GEMMs, so a CTA pushes as soon as its own export is stored (kIdlePush: the start barrier's wait is behind).
    __syncthreads();
    if constexpr (!kIdlePush) dc::cluster_wait();
  } else if constexpr (kPushMerge) {
    // Push merge: no peer reads this CTA's smem; its threads read the export and (m_c, L_c) with generic
    // loads and push them to the peers with st.async (completion and visibility by the receiver's mbarrier).
    // So the export needs only a CTA barrier before the pushing threads read it, and the cluster barrier
    // only says "every peer is done with its KV tile" (the receive areas lie in it; its wgmmas retired
    // before it arrived): relaxed, without the release's MEMBAR.ALL.GPU.
    __syncthreads();
    cluster_sync_relaxed<kCluster>();
  } else {
    cluster_sync<kCluster>();  // pull merge: every CTA's (m_c, L_c, O_c) is visible cluster-wide (release / acquire)
  }
  stamp(7);
  send_slices<kCluster, kPushBase>(smem, pushes);  // push merge only
  stamp(8);

  // 5. Merge in fixed rank order (swapab_merge.cuh): the per-head weights, then the output.
  merge<kCluster>(p, t, h0, rank, smem, recv_bar, ml, wts, den, cs_s, sink_s);
  stamp(10);
  // Exit rule (HOPPER_NOTES §5): no CTA leaves while a peer may still read or write its smem. The pull merge's
  // peers read it (DSMEM loads): a cluster barrier, relaxed (nothing needs ordering; a release arrive waits for
  // this CTA's output stores to reach the GPU, MEMBAR.GPU). The push merge's only access to a CTA's smem is the
  // peers' st.async into it, all of which this CTA waited for (its receive barriers, every thread), so it leaves
  // without one: the barrier's own latency was the end of every call.
  if constexpr (!kPushMerge) cluster_sync_relaxed<kCluster>();
  stamp(11);
}

}  // namespace swapab

// One entry point per tiling (launch_kernel picks the function by the launch's shape): grid.x = T *
// head_groups * cluster CTAs in clusters of that size, block.x = kSwapabThreads, dynamic smem =
// swapab_smem(kKey, kVariant).total (1024 B of it slack for the base alignment). One entry that dispatched on
// %cluster_nctarank held all three tilings' code (~170 KB at 16 heads) and a launch jumped 50-110 KB into
// code not yet fetched; the portable tiling alone ran 1.1-2.5 % faster at T = 16 and 64 (perf-notes, session 17).
// The portable tiling (cluster = swapab_cluster(kKey), 128-slot compressed tiles): every key has it.
__global__ void __launch_bounds__(kSwapabThreads, 1) swapab_decode_kernel(const __grid_constant__ DecodeParams p) {
  swapab::decode_token<swapab::Tiling<swapab::kCluster, kSwapabCompTile>>(p);
}

// The wide tiling (cluster = swapab_wide_cluster, 64-slot compressed tiles) and the mid one
// (swapab_mid_cluster, 96-slot tiles), by fixed unmangled names (FamilyInfo::wide_entry, mid_entry). The host
// resolves them only for keys that have the shape; elsewhere they are never launched and trap if they are.
extern "C" __global__ void __launch_bounds__(kSwapabThreads, 1)
    swapjit_swapab_decode_kernel_wide(const __grid_constant__ DecodeParams p) {
  if constexpr (swapab::kWideCluster > 0) {
    swapab::decode_token<swapab::Tiling<swapab::kWideCluster, kSwapabWideCompTile>>(p);
  } else {
    __trap();
  }
}
extern "C" __global__ void __launch_bounds__(kSwapabThreads, 1)
    swapjit_swapab_decode_kernel_mid(const __grid_constant__ DecodeParams p) {
  if constexpr (swapab::kMidCluster > 0) {
    swapab::decode_token<swapab::Tiling<swapab::kMidCluster, kSwapabMidCompTile>>(p);
  } else {
    __trap();
  }
}

}  // namespace swapjit
