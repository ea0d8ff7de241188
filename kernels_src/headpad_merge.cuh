// headpad_merge.cuh: step 5 of the head-padded kernel (SPEC.md §3.2 step 5): the kSplits partials
// (m, L, O) of an M tile merged in FIXED rank order (SPEC §3.3), the sink added once, then the shared
// epilogue (inverse RoPE, output layout) per (head, 8-dim chunk). Push (st.async of slices, as swap-AB's
// merge) where the cluster has several splits per M tile, pull (DSMEM loads) otherwise and for the tail
// that does not fit the receive area (headpad_traits.cuh, headpad_merge()).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include "headpad_shape.cuh"

namespace swapjit {
namespace hp {


// Head hl's merge weights from the kSplits (m, L) rows in `mlx` ([kSplits][2][64], local smem): w_q =
// 2^(m_q - M) (0 for an empty part), den = sum_q w_q L_q + the sink once (sink_l2: the head's sink in the log2
// domain, -inf without one; not scaled by sm_scale), the sum in fixed rank order (SPEC §3.3); returns 1 / den,
// 0 when every part is empty (zero output).
template <int kS>
__device__ __forceinline__ float head_weights(const float* mlx, int hl, float sink_l2, float (&w)[kS]) {
  float mq[kS], lq[kS];
#pragma unroll
  for (int q = 0; q < kS; ++q) {
    mq[q] = mlx[q * 2 * kHeadpadMTile + hl];
    lq[q] = mlx[q * 2 * kHeadpadMTile + kHeadpadMTile + hl];
  }
  float big_m = kNegInf;
#pragma unroll
  for (int q = 0; q < kS; ++q) big_m = fmaxf(big_m, mq[q]);
  float d = 0.0f;
#pragma unroll
  for (int q = 0; q < kS; ++q) {
    w[q] = big_m == kNegInf || mq[q] == kNegInf ? 0.0f : exp2f(mq[q] - big_m);
    d += w[q] * lq[q];
  }
  if (big_m != kNegInf) d += exp2f(sink_l2 - big_m);
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// One merge task (head hb + hl, hb the M tile's first head in the layer; 8-dim chunk c8) from the kSplits
// partials `ov` (rank order), the head's weights w and 1 / den: the weighted sum in fixed rank order (SPEC
// §3.3), one scaling, then inverse RoPE and the output. The same operations in the same order as the pull
// merge below (weights via smem there): same bits.
template <int kS>
__device__ __forceinline__ void merge_task(const DecodeParams& p, int t, int hb, int hl, int c8,
                                           const float4 (&ov)[kS][2], const float (&w)[kS], float inv,
                                           const float* cs) {
  float o[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
  for (int q = 0; q < kS; ++q) {
    if (w[q] != 0.0f) dc::add_weighted_chunk<8>(o, w[q], ov[q]);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i] *= inv;
  dc::write_out_chunk<8>(p, t, hb + hl, c8, o, cs);
}

// A task whose thread computes its head's weights itself (a thread with one task: no barrier needed).
template <int kS>
__device__ __forceinline__ void merge_task(const DecodeParams& p, int t, int hb, int hl, int c8,
                                           const float4 (&ov)[kS][2], const float* mlx, float sink_l2,
                                           const float* cs) {
  float w[kS];
  const float inv = head_weights<kS>(mlx, hl, sink_l2, w);
  merge_task<kS>(p, t, hb, hl, c8, ov, w, inv, cs);
}

// Head hb + hl's sink in the log2 domain (-inf without sinks).
__device__ __forceinline__ float sink_log2(const DecodeParams& p, int hb, int hl) {
  return p.sink != nullptr ? p.sink[hb + hl] * kLog2e : kNegInf;
}

// This thread's part of the push merge's pushes (merge, dc::PushPlan): threads [j G, (j + 1) G), G =
// kHeadpadThreads / (kSplits - 1), push the j-th other split of this M tile (dest: that split). After the
// publishing barrier, this arithmetic and the four mapa were ~70 SASS instructions ahead of the first
// st.async (as in swap-AB, session 23).
template <class Sh>
__device__ __forceinline__ dc::PushPlan plan_pushes(unsigned char* smem, int mt, int split,
                                                    cuda::std::uint64_t* recv_bar, float* ml) {
  dc::PushPlan s;
  if constexpr (Sh::kPush) {
    constexpr int kSplits = Sh::kSplits, kTaskBytes = Sh::kTaskBytes, kGroup = kHeadpadThreads / (kSplits - 1);
    constexpr HeadpadMerge kMg = Sh::kMg;
    const int tid = threadIdx.x, j = tid / kGroup;
    if (j < kSplits - 1) {
      s.dest = j < split ? j : j + 1;
      const int peer = kSplits * mt + s.dest;
      s.idx = tid - j * kGroup;
      s.bytes = min(kMg.slice, max(0, kMg.push_tasks - s.dest * kMg.slice)) * kTaskBytes;
      s.ml = dc::map_push(reinterpret_cast<unsigned char*>(ml), recv_bar, peer);  // into the peer's mlx row
      s.slice = dc::map_push(smem + Sh::kSm.recv + (split < s.dest ? split : split - 1) * kMg.slice * kTaskBytes,
                             recv_bar, peer);
    }
    s.pinned();
  }
  return s;
}
// Arms recv_bar for what the peers push this CTA (their slices of this split and their (m, L) rows): before
// the publishing barrier, off the pushes' path (no peer pushes before it; a phase may see its bytes first).
template <class Sh>
__device__ __forceinline__ void arm_receive(int split, cuda::std::uint64_t* recv_bar) {
  if constexpr (Sh::kPush) {
    const int mine = min(Sh::kMg.slice, max(0, Sh::kMg.push_tasks - split * Sh::kMg.slice));
    if (threadIdx.x == 0)
      dc::expect_bytes(recv_bar, (Sh::kSplits - 1) * (mine * Sh::kTaskBytes + kMlRowBytes));
  }
}

// The merge, after the publishing cluster barrier: M tile mt (its first head in the layer: hb), this CTA's
// split; `ml` is this CTA's (m, L) row (in the push merge's mlx area), `recv_bar` the receive mbarrier (armed
// by arm_receive), `to` this thread's pushes (plan_pushes). Every thread calls it.
template <class Sh>
__device__ __forceinline__ void merge(const DecodeParams& p, int t, int mt, int hb, int split, unsigned char* smem,
                                      cuda::std::uint64_t* recv_bar, float* ml, const dc::PushPlan& to) {
  // The launch's shape (headpad_shape.cuh Shape): these shadow the portable shape's constants.
  constexpr int kSplits = Sh::kSplits;
  constexpr HeadpadSmem kSm = Sh::kSm;
  constexpr HeadpadMerge kMg = Sh::kMg;
  constexpr bool kPush = Sh::kPush, kTail = Sh::kTail, kPacked = Sh::kPacked;
  constexpr int kTaskBytes = Sh::kTaskBytes;
  const int tid = threadIdx.x;
  const unsigned sbase = dc::smem_addr(smem);
  // Merge (SPEC §3.2 step 5) of the M tile's kSplits partials, in rank order.
  if constexpr (kPush) {
    // Push: send every peer of the M tile its slice of this CTA's export and this CTA's (m, L) row (st.async
    // stores completing on the peer's recv_bar, armed by arm_receive for what the peers send here), to the
    // ends plan_pushes mapped, then merge this split's slice from local smem (the own slice in place). Receive
    // area: [kSplits - 1] slices of kMg.slice tasks x 32 B, in sender order without the own split.
    unsigned char* recv = smem + kSm.recv;
    const int slice0 = split * kMg.slice;
    const int mine = min(kMg.slice, max(0, kMg.push_tasks - slice0));
    // Threads [j G, (j + 1) G) push the j-th other split of this M tile this CTA's (m, L) row and then its
    // slice, 16 B a store (dc::push_mapped_upto: st.async by many threads, no copy engine queue).
    constexpr int kGroup = kHeadpadThreads / (kSplits - 1);
    if (to.dest >= 0) {
      dc::push_mapped_upto<kGroup, kMlRowBytes>(to.ml, reinterpret_cast<const unsigned char*>(ml), kMlRowBytes,
                                                to.idx);
      dc::push_mapped_upto<kGroup, kMg.slice * kTaskBytes>(
          to.slice, smem + kSm.oexp + to.dest * kMg.slice * kTaskBytes, to.bytes, to.idx);
    }
    const float* mlx = reinterpret_cast<const float*>(smem + kSm.mlx);  // [kSplits][2][64]
    const float* cs = reinterpret_cast<const float*>(smem + kSm.cs);  // stored with Q
    // Pulled tail (kTail): this thread's one task's 2 * kSplits DSMEM loads go out before the wait, their
    // latency hidden behind the pushes'. The tail goes first to the threads with one slice task fewer
    // (those from mine % 256 on). Warp-uniform: every bound is a multiple of 32.
    const int tail_i = (tid - mine % kHeadpadThreads + kHeadpadThreads) % kHeadpadThreads;
    const int tail_task = kMg.push_tasks + split * kMg.tail_slice + tail_i;
    const bool has_tail = kTail && tail_i < kMg.tail_slice && tail_task < kMg.tasks;
    float4 tv[kSplits][2];
    if (has_tail) {
      const unsigned off = sbase + kSm.oexp + oexp_off(tail_task >> 6, 4 * (tail_task & 63));
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {
        const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
        tv[q][0] = ld_cluster_v4(map_rank(off, peer));
        tv[q][1] = ld_cluster_v4(map_rank(off + 16, peer));
      }
    }
    // A thread's slice tasks (at most kIt) all at once: their sinks (global) before the wait, their 2 *
    // kSplits smem loads each before the first task's chain. One task after another, each waiting on its
    // own sink load, the 64-head merge took 7 us (swapjit timeline, session 5).
    constexpr int kIt = (kMg.slice + kHeadpadThreads - 1) / kHeadpadThreads;
    // With several tasks a thread (64 and 128 heads; 32 heads over at most 8 splits), a head's weights would be
    // computed by every warp of its tasks, ~150 of a task's ~450 SASS instructions (session 21): one thread a
    // head computes them once instead (kSharedWeights, after the wait; merge 2.14 -> 1.86 us at 64 heads T = 1).
    constexpr bool kSharedWeights = kIt > 1;
    float sink_t[kIt];
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kHeadpadThreads;
      sink_t[it] = !kSharedWeights && i < mine ? sink_log2(p, hb, (slice0 + i) >> 6) : kNegInf;
    }
    const float sink_tail = !kSharedWeights && has_tail ? sink_log2(p, hb, tail_task >> 6) : kNegInf;
    // The last kMg.live threads compute the shared weights: the slice's remainder tasks go to the first threads.
    const int head_w = tid - (kHeadpadThreads - kMg.live);
    const float sink_head = kSharedWeights && head_w >= 0 ? sink_log2(p, hb, head_w) : kNegInf;
    // The shared weights below overwrite mlx in place, this CTA's own (m, L) row included, which other threads'
    // pushes above read: a CTA barrier orders every push's loads before those writes (the peers' bytes arriving
    // does not). Off the merge's path: the wait that follows is for the peers' bytes.
    if constexpr (kSharedWeights) __syncthreads();
    while (!cuda::ptx::mbarrier_try_wait_parity(recv_bar, 0u)) {
    }
    dc::stamp(8);  // timeline builds only: every peer's slice and (m, L) row arrived
    // Task i of the slice: its bytes at `own` - kTaskBytes * slice0 of every sender's copy: fp32, 32 B at
    // oexp_off(hl, 4 c8) (the swizzle permutes chunks within aligned groups of 8 tasks); packed, the task's
    // unit (swizzled within aligned groups of 8 units) and dims 8 (c8 & 1) of it. Slices start at multiples
    // of 32 tasks.
    float4 ov[kIt][kSplits][2];
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kHeadpadThreads;
      if (i < mine) {  // warp-uniform: mine is a multiple of 32
        const int task = slice0 + i;
        const unsigned own = kPacked ? pack24::unit_index(task >> 6, (task & 63) >> 1) * pack24::kUnitBytes
                                     : oexp_off(task >> 6, 4 * (task & 63));
        const unsigned rel = own - static_cast<unsigned>(slice0 * kTaskBytes);
#pragma unroll
        for (int q = 0; q < kSplits; ++q) {
          const unsigned char* at =
              q == split ? smem + kSm.oexp + own : recv + (q < split ? q : q - 1) * (kMg.slice * kTaskBytes) + rel;
          if constexpr (kPacked) {
            dc::unpack_task<8>(at, 8 * (task & 1), ov[it][q]);
          } else {
            ov[it][q][0] = reinterpret_cast<const float4*>(at)[0];
            ov[it][q][1] = reinterpret_cast<const float4*>(at)[1];
          }
        }
      }
    }
    if constexpr (kSharedWeights) {
      // In place, under the other threads' slice loads above: w_q over m_q, 1 / den over L_0. Column hl of
      // mlx is read and written by one thread only, and nothing reaches mlx after the wait (the peers' pushes
      // have landed; this CTA's own pushes read its row before the barrier above).
      float* mlx_w = reinterpret_cast<float*>(smem + kSm.mlx);
      if (head_w >= 0) {
        float w[kSplits];
        const float inv = head_weights<kSplits>(mlx, head_w, sink_head, w);
#pragma unroll
        for (int q = 0; q < kSplits; ++q) mlx_w[q * 2 * kHeadpadMTile + head_w] = w[q];
        mlx_w[kHeadpadMTile + head_w] = inv;
      }
      __syncthreads();
    }
    // Task (hl, c8) with its head's weights (shared: from mlx; else computed by this thread).
    const auto run_task = [&](int task, const float4(&v)[kSplits][2], float sink_l2) {
      const int hl = task >> 6, c8 = task & 63;
      if constexpr (kSharedWeights) {
        float w[kSplits];
#pragma unroll
        for (int q = 0; q < kSplits; ++q) w[q] = mlx[q * 2 * kHeadpadMTile + hl];
        merge_task<kSplits>(p, t, hb, hl, c8, v, w, mlx[kHeadpadMTile + hl], cs);
      } else {
        merge_task<kSplits>(p, t, hb, hl, c8, v, mlx, sink_l2, cs);
      }
    };
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kHeadpadThreads;
      if (i < mine) run_task(slice0 + i, ov[it], sink_t[it]);
    }
    if (has_tail) run_task(tail_task, tv, sink_tail);
  } else {
    // Pull (one split per M tile: no cluster, or 128 heads of a SWA-only layer). First the per-head weights,
    // once per CTA (thread hl): w_q = 2^(m_q - M) (0 for an empty part), den = sum_q w_q L_q + the sink
    // (not scaled by sm_scale), 0 when every part is empty. The P tiles are free now (no peer reads them).
    const int live = min(kHeadpadMTile, kH - kHeadpadMTile * mt);
    float* wts = reinterpret_cast<float*>(smem + kSm.p);     // fp32 [64][kSplits]
    float* den = reinterpret_cast<float*>(smem + kSm.p_lo);  // fp32 [64]
    static_assert(kHeadpadMTile * kHeadpadMaxCluster * 4 <= kHeadpadMTile * kHeadpadChunk * 2, "weights fit in P");
    if (tid < live) {
      float mq[kSplits], lq[kSplits];
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {  // every DSMEM load issued before the first use
        const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
        mq[q] = ld_cluster_f32(map_rank(sbase + kSm.ml + tid * 4, peer));
        lq[q] = ld_cluster_f32(map_rank(sbase + kSm.ml + (kHeadpadMTile + tid) * 4, peer));
      }
      float big_m = kNegInf;
#pragma unroll
      for (int q = 0; q < kSplits; ++q) big_m = fmaxf(big_m, mq[q]);
      float d = 0.0f;  // a token with no used entry: all-zero output (scale byte 105 in MXFP8)
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {  // fixed rank order: deterministic (SPEC §3.3)
        const float w = big_m == kNegInf || mq[q] == kNegInf ? 0.0f : exp2f(mq[q] - big_m);
        wts[tid * kSplits + q] = w;
        d += w * lq[q];
      }
      if (big_m != kNegInf) {
        d += exp2f(sink_log2(p, hb, tid) - big_m);  // the sink, once, after the merge; d >= 1 here (or NaN for NaN inputs)
      }
      den[tid] = d;
    }
    __syncthreads();
    // Then the output: task = (head, 8-dim chunk), one thread each over the M tile's kSplits CTAs, in order,
    // so a quad holds one 32-dim block (write_out_chunk<8>). A thread issues its 2 * kSplits 16-B DSMEM loads
    // before the first use (docs/perf-notes.md, session 2). live * 64 is a multiple of 32: whole warps.
    {
      const float* cs = reinterpret_cast<const float*>(smem + kSm.cs);  // stored with Q
      for (int task = split * kHeadpadThreads + tid; task < live * 64; task += kSplits * kHeadpadThreads) {
        const int hl = task >> 6, c8 = task & 63;
        // Dims 8*c8.. are float pairs 4*c8..4*c8+3: under the pair swizzle (bits 2..4) still 32 contiguous bytes.
        const unsigned off = sbase + kSm.oexp + oexp_off(hl, 4 * c8);
        float4 ov[kSplits][2];
#pragma unroll
        for (int q = 0; q < kSplits; ++q) {
          const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
          ov[q][0] = ld_cluster_v4(map_rank(off, peer));
          ov[q][1] = ld_cluster_v4(map_rank(off + 16, peer));
        }
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
        for (int q = 0; q < kSplits; ++q) {  // fixed rank order; an empty part (w = 0) contributes nothing
          const float w = wts[hl * kSplits + q];
          if (w != 0.0f) dc::add_weighted_chunk<8>(o, w, ov[q]);
        }
        // One division, then products (the swap-AB merge lost 4-5 % of its call time to 8 divisions).
        const float d = den[hl], inv = d != 0.0f ? 1.0f / d : 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] *= inv;
        dc::write_out_chunk<8>(p, t, hb + hl, c8, o, cs);  // inverse RoPE (step 7) + output (step 8)
      }
    }
  }
}

}  // namespace hp
}  // namespace swapjit
