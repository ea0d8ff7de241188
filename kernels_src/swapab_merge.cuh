// swapab_merge.cuh: step 5 of the swap-AB kernel (SPEC.md §3.2 step 5; docs/swapab-design.md): the
// cluster's partials (m_c, L_c, O_c) merged in FIXED rank order (SPEC §3.3), the sink added once, and the
// epilogue (inverse RoPE, output layout) per (head, 8-dim chunk).
// NOTE: device code, compiled by NVRTC after the prelude that defines kKey and kVariant.
#pragma once
#include <cuda/ptx>

#include "swapab_shape.cuh"

namespace swapjit {
namespace swapab {

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

// After the publishing cluster barrier (every CTA's export complete, the KV tile and Q dead): sends every
// peer its slice of this CTA's O^T export and arms this CTA's receive barrier for its own slice.
__device__ __forceinline__ void send_slices(unsigned char* smem, int rank, cuda::std::uint64_t* recv_bar) {
  const int tid = threadIdx.x;
  unsigned char* recv = smem + kSm.oexp + kExportBytes;  // [kCluster][kSliceTasks] x 32 B (push merge)
  if constexpr (kPushMerge) {
    if (tid == 0) {  // my slice from every peer (my own part is read in place)
      const int mine = min(kSliceTasks, max(0, kTasks - rank * kSliceTasks));
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           recv_bar, static_cast<cuda::std::uint32_t>((kCluster - 1) * mine * 32));
    }
    if (tid < kCluster && tid != rank) {  // thread r sends peer r its slice of this CTA's partial
      const int n = min(kSliceTasks, max(0, kTasks - tid * kSliceTasks));
      if (n > 0) {
        void* dst = dc::map_rank_ptr(recv + rank * kSliceTasks * 32, tid);
        cuda::std::uint64_t* bar = dc::map_rank_ptr(recv_bar, tid);
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared, dst,
                                 smem + kSm.oexp + tid * kSliceTasks * 32, static_cast<cuda::std::uint32_t>(n * 32), bar);
      }
    }
  }
}

// The merge weights, once per CTA: wts [kH][kCluster], den [kH]; ends with a CTA barrier.
__device__ __forceinline__ void merge_weights(const DecodeParams& p, const float* ml, float* wts, float* den) {
  const int tid = threadIdx.x;
  // Thread h reads (m_r, L_r) of every rank, M = max over non-empty parts, w_r = exp(m_r - M) (0 for an
  // empty part), den = sum_r w_r L_r in rank order, plus the sink once (not scaled by sm_scale; null =
  // -inf).
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
}

// The output of this CTA's merge tasks (after merge_weights and a CTA barrier).
__device__ __forceinline__ void merge_output(const DecodeParams& p, int t, int rank, unsigned char* smem,
                                             cuda::std::uint64_t* recv_bar, const float* wts, const float* den,
                                             const float* cs_s) {
  const int tid = threadIdx.x;
  const unsigned char* recv = smem + kSm.oexp + kExportBytes;  // [kCluster][kSliceTasks] x 32 B (push merge)
  const float* oexp = reinterpret_cast<const float*>(smem + kSm.oexp);  // fp32 [kH][512]
  // Task = (head, 8-dim chunk), one thread each, so the four lanes of a quad hold one 32-dim block (the
  // MXFP8 amax is a 2-step quad shuffle). Each task sums the kCluster partials in rank order (SPEC §3.3)
  // with the weights of merge_weights.
  static_assert(kTasks % 32 == 0 && kSliceTasks % 32 == 0, "whole warps take part or none (quad shuffles)");
  const auto merge_task = [&](int task, const float4 (&ov)[kCluster][2]) {
    const int h = task >> 6, c8 = task & 63;
    float o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) dc::add_weighted_chunk8(o, wts[h * kCluster + r], ov[r]);
    const float dh = den[h];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = dh > 0.0f ? o[i] / dh : 0.0f;
    dc::write_out_chunk8(p, t, h, c8, o, cs_s);
  };
  if constexpr (kPushMerge) {
    while (!cuda::ptx::mbarrier_try_wait_parity(recv_bar, 0u)) {
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
}

}  // namespace swapab
}  // namespace swapjit
