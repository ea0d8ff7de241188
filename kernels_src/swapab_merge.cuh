// swapab_merge.cuh: step 5 of the swap-AB kernel (SPEC.md §3.2 step 5; docs/swapab-design.md): the
// cluster's partials (m_c, L_c, O_c) merged in FIXED rank order (SPEC §3.3), the sink added once, and the
// epilogue (inverse RoPE, output layout) per (head, 8-dim chunk).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include <cuda/ptx>

#include "swapab_shape.cuh"

namespace swapjit {
namespace swapab {

// Merge tasks (head, N-dim chunk), N = MergePlan::kTaskDims (8 or 4): N fp32 of a CTA's O^T partial each, task
// = h * (512 / N) + c at bytes [MergePlan::export_byte(task), + 4N) of the [h][512] export (swapab_shape.cuh:
// its 32-B units permuted inside groups of 4). Push merge: rank r owns tasks [r * kSliceTasks, ...) (whole
// warps); every CTA pushes each owner its slice of its partial (16-B st.async stores: 2 * kCluster 16-B DSMEM
// loads per task, round trips, showed queueing at ~7 us per step in ncu) into a receive area [kCluster]
// [kSliceTasks] x kTaskBytes in the dead KV tile (behind the export where the export aliases it: mma). A CTA's
// own slice is read in place.
constexpr int kExportBytes = kH * kHeadDim * 4;
// The push merge also carries every peer's (m_c, L_c) ([2][kH] fp32, the ml region), ahead of the slices
// on its own mbarrier, so the weights are computed from local smem (no DSMEM round trip, no extra CTA
// barrier) while the slices are still on the way.
constexpr int kMlBytes = 2 * kH * 4;
static_assert(kMlBytes % 16 == 0, "pushed in 16-B pieces");
// The receive area: its own (kSm.recv, swapab_own_recv), or else the KV tile, dead in every CTA of the cluster
// after the publishing cluster barrier; behind the export when the export aliases the tile (it may then run on
// into Q, dead too), never over the export.
constexpr bool kExportInKv = kSm.oexp == kSm.kv;
constexpr bool kOwnRecv = swapab_own_recv(kKey, kVariant);
constexpr int kRecvOffset = kOwnRecv ? kSm.recv : kExportInKv ? kSm.kv + kExportBytes : kSm.kv;
constexpr int kRecvEnd = kOwnRecv ? kSm.total - kSwapabAlignSlack : kExportInKv ? kSm.s : kSm.q;
// The merge's shape for a cluster of C CTAs (the key's cluster, or its wide or mid one). Tasks of 4 dims
// when 8-dim tasks would leave at least half of a CTA's threads idle: each task is one thread's dependent
// chain (loads, rank-ordered sums, inverse RoPE, MXFP8 block amax by shuffles, stores), and with 4 of 16
// warps busy the merge of 16 heads took ~1 us (swapjit timeline, sessions 5-6: ~400 instructions at ~5
// cycles each). Half the chain on twice the warps. 8-dim tasks where 4-dim ones would need a second round.
template <int C>
struct MergePlan {
  static constexpr int kTaskDims = swapab_merge_task_dims(kH, C);
  static constexpr int kTaskBytes = kTaskDims * 4;
  static constexpr int kTasksPerHead = kHeadDim / kTaskDims;
  static constexpr int kTasks = kH * kTasksPerHead;
  static constexpr int kSliceTasks = swapab_merge_slice_tasks(kH, C);
  // Packed slices (export_pack24.cuh: 3 B a value on the cluster network instead of 4): the wgmma variant,
  // whose export (in the dead Q and score rows) is stored packed by values_export_wgmma, wherever the packed
  // receive area fits (its own, or the dead KV tile: every 8-32-head key of the presets, SWA-only at 32 heads
  // included: 49 KB in 64 KB). Elsewhere fp32 slices, or the pull merge from the fp32 export.
  static constexpr int kPackedTaskBytes = kTaskBytes * 3 / 4;
  static constexpr bool kPacked =
      kWgmma && C > 1 && !kExportInKv && kRecvOffset + C * (kSliceTasks * kPackedTaskBytes + kMlBytes) <= kRecvEnd;
  static constexpr int kWireTaskBytes = kPacked ? kPackedTaskBytes : kTaskBytes;  // a task's bytes in a slice
  static constexpr int kRecvSliceBytes = C * kSliceTasks * kWireTaskBytes;
  static constexpr int kRecvBytes = kRecvSliceBytes + C * kMlBytes;
  static constexpr bool kPush = C > 1 && kRecvOffset + kRecvBytes <= kRecvEnd;
  static_assert(!kOwnRecv || C == 1 || (kPacked && kPush && kRecvBytes == swapab_recv_bytes(kH, C, true)),
                "the own receive area holds this cluster's packed slices (swapab_traits.cuh swapab_smem)");
  // Staged receive, for large slices: each peer's slice on its own barrier, added as it lands (merge()). Reading
  // all slices after the last one took ~740 ns at 32 heads in 6-CTA clusters (8.4 KB slices: the reads are
  // bound by shared-memory bandwidth), and staging them measured 0.975-0.997 there; with smaller slices (16
  // heads, or 32 heads in 8- and 10-CTA clusters) the per-slice waits cost more than they hide (1.01-1.06,
  // perf-notes session 17, `swapab-merge-staged-parallel-push.patch`).
  static constexpr bool kStaged = kPush && kSliceTasks * kWireTaskBytes >= 8192;
  static constexpr int kRecvBarriers = kStaged ? C : 2;
  static_assert(!kPacked || (kSliceTasks * kPackedTaskBytes % (8 * pack24::kUnitBytes) == 0 && kRecvBytes % 16 == 0),
                "packed slices: whole aligned groups of 8 units (the swizzle stays inside them), 16-B aligned pieces");
  // Byte offset of task `task` in the export (and, minus the slice's start, in a received slice).
  static __device__ __forceinline__ int export_byte(int task) {
    if constexpr (kTaskDims == 8) {
      return export_task_slot(task) * 32;
    } else {
      return export_task_slot(task >> 1) * 32 + (task & 1) * 16;
    }
  }
  // Packed: byte offset of the task's unit (export_pack24.cuh), and its first dim within the unit (0, 4, 8, 12).
  static __device__ __forceinline__ int packed_unit_byte(int task) {
    const int h = task / kTasksPerHead, d0 = (task % kTasksPerHead) * kTaskDims;
    return pack24::unit_index(h, d0 >> 4) * pack24::kUnitBytes;
  }
  static __device__ __forceinline__ int packed_dim(int task) { return ((task % kTasksPerHead) * kTaskDims) & 15; }
};
// Reads the 16 bytes (4 fp32) at the same smem offset as `local` (16-B aligned) in CTA `rank`.
template <int C>
__device__ __forceinline__ float4 ld_peer_v4(const float* local, int rank) {
  if constexpr (C == 1) {
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

// The pushing threads: [kBase, kSwapabThreads), G = (kSwapabThreads - kBase) / (C - 1) a peer. kBase is 0, or
// the first thread past the softmax's (kH * kTPH) where the softmax leaves whole warps idle (8 heads: warps
// 8-15; swapab_decode.cuh, kIdlePush).
template <int kBase>
constexpr int push_group(int C) {
  return (kSwapabThreads - kBase) / (C - 1);
}
// This thread's part of the pushes (send_slices, dc::PushPlan): threads kBase + [q G, (q + 1) G) push the peer
// q + 1 ranks above this CTA (dest: that rank). Launch-parameter arithmetic: the kernel runs it before the
// dependency wait (session 35); after the publishing barrier it and the four mapa were ~70 SASS instructions ahead
// of the first st.async (session 23).
template <int C, int kBase>
__device__ __forceinline__ dc::PushPlan plan_pushes(unsigned char* smem, int rank, cuda::std::uint64_t* recv_bar) {
  using M = MergePlan<C>;
  dc::PushPlan s;
  if constexpr (M::kPush) {
    constexpr int kGroup = push_group<kBase>(C);
    const int tid = static_cast<int>(threadIdx.x) - kBase, q = tid / kGroup;
    if (tid >= 0 && q < C - 1) {
      const int k = q + 1;
      s.dest = rank + k < C ? rank + k : rank + k - C;
      s.idx = tid - q * kGroup;
      s.bytes = min(M::kSliceTasks, max(0, M::kTasks - s.dest * M::kSliceTasks)) * M::kWireTaskBytes;
      unsigned char* recv = smem + kRecvOffset;  // [C][kSliceTasks] x kWireTaskBytes, then [C][2][kH] fp32
      s.ml = dc::map_push(recv + M::kRecvSliceBytes + rank * kMlBytes, &recv_bar[0], s.dest);
      s.slice = dc::map_push(recv + rank * M::kSliceTasks * M::kWireTaskBytes, &recv_bar[M::kStaged ? k : 1], s.dest);
    }
    s.pinned();
  }
  return s;
}

// The bytes receive barrier k of this CTA expects from its peers: [0] their (m, L) rows, [1] their slices of
// this rank's tasks, or staged, [k] the slice of the peer k ranks below.
template <int C>
__device__ __forceinline__ unsigned receive_bytes(int rank, int k) {
  using M = MergePlan<C>;
  const int mine = min(M::kSliceTasks, max(0, M::kTasks - rank * M::kSliceTasks));  // my slice from every peer
  return k == 0 ? (C - 1) * kMlBytes : (M::kStaged ? 1 : C - 1) * mine * M::kWireTaskBytes;
}
// Arms this CTA's receive barriers (one thread a barrier). Before the publishing barrier, off the pushes' path:
// no peer can push before it, and a phase may see its bytes before or after its expectation.
template <int C>
__device__ __forceinline__ void arm_receive(int rank, cuda::std::uint64_t* recv_bar) {
  using M = MergePlan<C>;
  if constexpr (M::kPush) {
    const int tid = threadIdx.x;
    if (tid < M::kRecvBarriers) dc::expect_bytes(&recv_bar[tid], receive_bytes<C>(rank, tid));
  }
}
// The same from the caller's thread alone (the early-push path, which also initialised them in that thread).
template <int C>
__device__ __forceinline__ void arm_receive_all(int rank, cuda::std::uint64_t* recv_bar) {
  using M = MergePlan<C>;
  if constexpr (M::kPush) {
    for (int k = 0; k < M::kRecvBarriers; ++k) dc::expect_bytes(&recv_bar[k], receive_bytes<C>(rank, k));
  }
}

// After the publishing cluster barrier (every CTA's export complete, the KV tile and Q dead): pushes every
// peer this CTA's (m_c, L_c) (first, on the peer's recv_bar[0]) and its slice of this CTA's O^T export (on
// recv_bar[1], or staged on recv_bar[k], k the sender's distance below the receiver), to the ends plan_pushes
// mapped. The (m, L) rows, 128-256 B, land long before the slices, so the merge computes its weights while the
// slices are still on the way. Receive area (at kRecvOffset): [kCluster][kSliceTasks] x kWireTaskBytes of
// slices (by sender rank), then [kCluster][2][kH] fp32 of (m, L).
template <int C, int kBase>
__device__ __forceinline__ void send_slices(unsigned char* smem, const dc::PushPlan& to) {
  using M = MergePlan<C>;
  constexpr int kCluster = C, kSliceTasks = M::kSliceTasks;
  if constexpr (M::kPush) {
    // Threads kBase + [q G, (q + 1) G) push the peer q + 1 ranks above this one its (m, L) rows and then its
    // slice, 16 B a store (dc::push_mapped_upto: st.async, no copy engine queue), all peers at once.
    constexpr int kGroup = push_group<kBase>(kCluster);
    if (to.dest >= 0) {
      dc::push_mapped_upto<kGroup, kMlBytes>(to.ml, smem + kSm.ml, kMlBytes, to.idx);
      dc::push_mapped_upto<kGroup, kSliceTasks * M::kWireTaskBytes>(
          to.slice, smem + kSm.oexp + to.dest * kSliceTasks * M::kWireTaskBytes, to.bytes, to.idx);
    }
  }
}

// Merge weights of one head from every rank's (m_r, L_r): M = max over the non-empty parts, w_r =
// exp2(m_r - M) (0 for an empty part; m_r, M and the sink in base-2 units, swapab_decode.cuh), den = sum_r
// w_r L_r in rank order plus the sink once (not scaled by sm_scale; -inf without one: exp2 gives 0, adding it
// changes nothing). den stays 0 when every part is empty:
// the token outputs zeros. No branches: an empty part's m_r = -inf gives exp2(-inf) = 0 exactly, and M = -inf
// (every part empty) is replaced by 0 so no -inf - -inf appears (the select form compiled to a branch per
// rank around each MUFU.EX2).
template <int kCluster>
__device__ __forceinline__ float head_weights(float sink, const float (&mr)[kCluster], const float (&lr)[kCluster],
                                              float (&w)[kCluster]) {
  float m_all = kNegInf;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) m_all = fmaxf(m_all, mr[r]);
  const float m_use = m_all == kNegInf ? 0.0f : m_all;
  float dsum = 0.0f;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) {
    w[r] = exp2f(mr[r] - m_use);
    dsum += w[r] * lr[r];
  }
  if (m_all != kNegInf) dsum += exp2f(sink - m_all);
  return dsum;
}

// The reciprocal the merged sum of a head is multiplied by: one division, then products (the merge is a
// latency-bound chain per thread, swapjit timeline, and 8 IEEE divisions were a large part of it; within SPEC
// §4, a 1-ulp difference per element). 0 when every part is empty (the token outputs zeros).
__device__ __forceinline__ float inverse_den(float dh) { return dh > 0.0f ? 1.0f / dh : 0.0f; }

// The end of one merge task = (head, N-dim chunk): the merged sum o times inv = inverse_den(den), then the
// epilogue. One thread each, so the 32 / N lanes of an aligned lane group hold one 32-dim block (the MXFP8 amax
// is a shuffle over them).
template <int N>
__device__ __forceinline__ void finish_task(const DecodeParams& p, int t, int h0, int task, float inv, float (&o)[N],
                                            const float* cs_s) {
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] *= inv;
  stamp(29);  // timeline builds only
  constexpr int kPerHead = kHeadDim / N;
  dc::write_out_chunk<N>(p, t, h0 + task / kPerHead, task % kPerHead, o, cs_s);
}

// One merge task from the kCluster partials read up front: summed in rank order (SPEC §3.3) with the weights,
// then finish_task.
template <int kCluster, int N>
__device__ __forceinline__ void merge_task(const DecodeParams& p, int t, int h0, int task, const float (&w)[kCluster],
                                           float inv, const float4 (&ov)[kCluster][N / 4], const float* cs_s) {
  float o[N];
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] = 0.0f;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) dc::add_weighted_chunk<N>(o, w[r], ov[r]);
  finish_task<N>(p, t, h0, task, inv, o, cs_s);
}

// Step 5 after send_slices. Push merge: wait for the peers' (m, L) rows, every task thread computes its
// head's weights from local smem, then waits for the slices and merges its chunk (staged: adds each slice
// as it lands). Pull merge (a cluster of one, or no room for the receive area): thread h computes head h's
// weights from DSMEM loads into wts / den, a CTA barrier, then tasks spread over the cluster's threads, each
// issuing its 2 * kCluster 16-B DSMEM loads before the first use.
template <int C>
__device__ __forceinline__ void merge(const DecodeParams& p, int t, int h0, int rank, unsigned char* smem,
                                      cuda::std::uint64_t* recv_bar, const float* ml, float* wts, float* den,
                                      const float* cs_s, const float* sink_s) {
  using M = MergePlan<C>;
  constexpr int kCluster = C, kSliceTasks = M::kSliceTasks, kRecvSliceBytes = M::kRecvSliceBytes;
  constexpr int kTasks = M::kTasks, kN = M::kTaskDims, kPerHead = M::kTasksPerHead;
  const int tid = threadIdx.x;
  static_assert(kTasks % 32 == 0 && kSliceTasks % 32 == 0, "whole warps take part or none (block shuffles)");
  if constexpr (M::kPush) {
    const unsigned char* recv = smem + kRecvOffset;
    const float* recv_ml = reinterpret_cast<const float*>(recv + kRecvSliceBytes);  // [kCluster][2][kH]
    const int mine = min(kSliceTasks, max(0, kTasks - rank * kSliceTasks));
    // The weights of a task's head from every rank's (m, L) (recv_bar[0]: the rows arrive first), w[k] for
    // rank src(k): rank k in rank order, or staged the peer k ranks below (k = 0: this CTA), the order the
    // slices are added in (compile-time indices either way).
    const auto src = [&](int k) {
      if constexpr (M::kStaged) return rank - k >= 0 ? rank - k : rank - k + kCluster;
      return k;
    };
    float w[kCluster], inv = 0.0f;
    const auto weights_of = [&](int h) {
      float mr[kCluster], lr[kCluster];
#pragma unroll
      for (int k = 0; k < kCluster; ++k) {
        const int r = src(k);
        const float* mlr = r == rank ? ml : recv_ml + r * 2 * kH;
        mr[k] = mlr[h];
        lr[k] = mlr[kH + h];
      }
      inv = inverse_den(head_weights(sink_s[h], mr, lr, w));
    };
    // A task's slice of rank r: its byte offset from smem (its start + (i permuted); packed: the task's unit,
    // swizzled inside groups of 8), and its values.
    const auto slice_offset = [&](int r, int task) {
      const int pos = M::kPacked ? M::packed_unit_byte(task) : M::export_byte(task);
      return r == rank ? kSm.oexp + pos  // own slice, in place
                       : kRecvOffset + (r - rank) * kSliceTasks * M::kWireTaskBytes + pos;
    };
    const auto read_slice = [&](int off, int task, float4 (&v)[kN / 4]) {
      const unsigned char* at = smem + off;
      if constexpr (M::kPacked) {
        dc::unpack_task<kN>(at, M::packed_dim(task), v);
      } else {
#pragma unroll
        for (int q = 0; q < kN / 4; ++q) v[q] = reinterpret_cast<const float4*>(at)[q];
      }
    };
    // The first task's slice offsets, its weights and reciprocal, all before the slices' wait: after it they
    // were ~60 SASS instructions of address arithmetic and a division (with its slow-path branch) between the
    // slices' landing and their loads, on the merge's latency chain (one task a thread, 4-11 of 16 warps
    // busy; session 23). The empty asm keeps them computed here (the compiler sinks them to their uses).
    int off0[kCluster];
#pragma unroll
    for (int k = 0; k < kCluster; ++k) {
      off0[k] = slice_offset(src(k), rank * kSliceTasks + tid);
      asm volatile("" : "+r"(off0[k]));
    }
    while (!cuda::ptx::mbarrier_try_wait_parity(&recv_bar[0], 0u)) {
    }
    stamp(26);  // timeline builds only
    if (tid < mine) weights_of((rank * kSliceTasks + tid) / kPerHead);  // the first task's, under the slices' copies
    asm volatile("" : "+f"(inv));
    stamp(27);  // timeline builds only
    if constexpr (!M::kStaged) {
      while (!cuda::ptx::mbarrier_try_wait_parity(&recv_bar[1], 0u)) {
      }
      stamp(9);
    }
    // One task: this CTA's and every peer's slice of it, weighted in a fixed order (SPEC §3.3), then its end.
    const auto run_task = [&](int task) {
      if constexpr (M::kStaged) {
        // This CTA's own partial, then each peer's as it lands, nearest first: a fixed order (SPEC §3.3).
        float o[kN];
#pragma unroll
        for (int d = 0; d < kN; ++d) o[d] = 0.0f;
#pragma unroll
        for (int k = 0; k < kCluster; ++k) {
          if (k > 0) {
            while (!cuda::ptx::mbarrier_try_wait_parity(&recv_bar[k], 0u)) {
            }
          }
          if (k == kCluster - 1) stamp(9);  // timeline builds only: the last slice landed
          float4 v[kN / 4];
          read_slice(off0[k], task, v);
          dc::add_weighted_chunk<kN>(o, w[k], v);
        }
        stamp(28);  // timeline builds only: thread 0's first task merged
        finish_task<kN>(p, t, h0, task, inv, o, cs_s);
      } else {
        float4 ov[kCluster][kN / 4];
#pragma unroll
        for (int r = 0; r < kCluster; ++r) read_slice(off0[r], task, ov[r]);  // src(r) = r unstaged
        stamp(28);  // timeline builds only: thread 0's first task
        merge_task<kCluster, kN>(p, t, h0, task, w, inv, ov, cs_s);
      }
    };
    if (tid < mine) run_task(rank * kSliceTasks + tid);  // warp-uniform: mine is a multiple of 32
    // Further tasks (SWA-only keys at 32 heads: slices of 1024 tasks) in a loop of their own, compiled only
    // where a slice has them: its loop-invariant address arithmetic, hoisted by the compiler, would otherwise
    // sit between the slices' wait and the first task's loads.
    if constexpr (kSliceTasks > kSwapabThreads) {
      for (int i = tid + kSwapabThreads; i < mine; i += kSwapabThreads) {  // warp-uniform bound
        const int task = rank * kSliceTasks + i;
        weights_of(task / kPerHead);
#pragma unroll
        for (int k = 0; k < kCluster; ++k) off0[k] = slice_offset(src(k), task);
        run_task(task);
      }
    }
  } else {
    if (tid < kH) {
      float mr[kCluster], lr[kCluster], w[kCluster];
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {  // every DSMEM load issued before the first use
        mr[r] = ld_peer_f32<C>(ml + tid, r);
        lr[r] = ld_peer_f32<C>(ml + kH + tid, r);
      }
      den[tid] = head_weights(sink_s[tid], mr, lr, w);
#pragma unroll
      for (int r = 0; r < kCluster; ++r) wts[tid * kCluster + r] = w[r];
    }
    __syncthreads();
    const float* oexp = reinterpret_cast<const float*>(smem + kSm.oexp);  // fp32 [kH][512]
    constexpr int kStride = kCluster * kSwapabThreads;
    for (int task = rank * kSwapabThreads + tid; task < kTasks; task += kStride) {  // warp-uniform bound
      const float* src = oexp + M::export_byte(task) / 4;
      float w[kCluster];
      float4 ov[kCluster][kN / 4];
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        w[r] = wts[(task / kPerHead) * kCluster + r];
#pragma unroll
        for (int k = 0; k < kN / 4; ++k) ov[r][k] = ld_peer_v4<C>(src + 4 * k, r);
      }
      merge_task<kCluster, kN>(p, t, h0, task, w, inverse_den(den[task / kPerHead]), ov, cs_s);
    }
  }
}

}  // namespace swapab
}  // namespace swapjit
