// merge_path_probe.cu: how fast can a cluster's CTAs exchange their partials, over the cluster network (what
// both decode kernels' push merges do) or through L2 (docs/perf-notes.md, session 9)? Built and run by
// scripts/device_probe.sh (nvcc -arch=sm_90a; not part of the library).
//
// Question. The swap-AB kernel's copies phase (every CTA sends each peer its slice of a 32-KB fp32 export by
// bulk copies shared::cta -> shared::cluster) takes ~1.1 us at 16 heads, ~2 us at 32, and the head-padded
// merge ~6 us at 64 heads: ~25 B/ns into a CTA. bulk_copy_probe.cu saw one CTA's bulk loads from L2 land at
// ~110-150 B/ns. So: does a round trip through global memory (bulk store of the export, a cluster barrier,
// bulk loads of the slices) beat the network, at the kernels' shapes (clusters of 10 and 6, 16 clusters at
// once for T = 16; 32, 64 and 96 KB exports)?
// Each CTA holds an `export_bytes` export in smem; rank r owns slice r (export_bytes / C, 16-B multiple).
// The clock starts after a cluster barrier (the kernels' publishing barrier) and stops when the CTA holds
// every peer's copy of its slice. Modes:
//   0 DSMEM push: warp p sends peer p its slice in 8 bulk copies (lanes 0..7) onto the peer's mbarrier (the kernels).
//   1 L2 by TMA: the export to global in 8 bulk stores (warp 0, lanes 0..7; wait_group 0), a release/acquire
//     cluster barrier, then warp p bulk-loads peer p's copy of this CTA's slice in 8 copies onto its own mbarrier.
//   2 L2, generic: every thread st.global's its 16-B pieces of the export, the cluster barrier, then ld.global
//     of the slices' 16-B pieces into smem.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.cuh"

constexpr int kThreads = 512, kPieces = 8;

__device__ __forceinline__ void cluster_sync_acq_rel() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <int Mode>
__global__ void __launch_bounds__(kThreads, 1)
    merge_probe(unsigned char* ws, int export_bytes, int csize, unsigned long long* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* exp_s = smem;                  // [export_bytes] this CTA's partial
  unsigned char* recv = smem + export_bytes;    // [csize][slice] the peers' copies of my slice
  __shared__ alignas(8) uint64_t bar;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const unsigned rank = cluster_rank();
  const int slice = (export_bytes / csize + 15) / 16 * 16;
  const int piece = (slice / kPieces + 15) / 16 * 16;
  unsigned char* my_ws = ws + static_cast<long>(blockIdx.x) * export_bytes;         // this CTA's copy in global
  unsigned char* cluster_ws = ws + static_cast<long>(blockIdx.x - rank) * export_bytes;  // rank 0's
  for (int i = tid * 16; i < export_bytes; i += kThreads * 16)
    *reinterpret_cast<uint4*>(exp_s + i) = make_uint4(i, rank, blockIdx.x, 7);
  // The last rank's slice ends at the export's end (shorter when C does not divide it).
  const int mine = min(slice, export_bytes - static_cast<int>(rank) * slice);
  if (tid == 0) {
    cuda::ptx::mbarrier_init(&bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &bar,
                                         static_cast<uint32_t>((csize - 1) * mine));
  }
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the export's generic stores before bulk reads of it
  __syncthreads();
  cluster_sync_acq_rel();  // every peer's barrier armed, every export written: the kernels' publishing barrier
  const unsigned long long t0 = gtimer();
  // Bytes [b0, b1) of slice `s`: piece `lane` of it.
  const auto piece_range = [&](int s, int& b0, int& b1) {
    b0 = s * slice + lane * piece;
    b1 = min(min((s + 1) * slice, export_bytes), b0 + piece);
  };
  if constexpr (Mode == 0) {
    const int peer = warp;
    if (peer < csize && peer != static_cast<int>(rank) && lane < kPieces) {
      int b0, b1;
      piece_range(peer, b0, b1);
      if (b1 > b0)
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared,
                                 map_rank(recv + rank * slice + (b0 - peer * slice), peer), exp_s + b0, b1 - b0,
                                 map_rank(&bar, peer));
    }
  } else if constexpr (Mode == 1) {
    if (warp == 0 && lane < kPieces) {
      const int b0 = lane * ((export_bytes / kPieces + 15) / 16 * 16);
      const int b1 = min(export_bytes, b0 + (export_bytes / kPieces + 15) / 16 * 16);
      if (b1 > b0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(my_ws + b0),
                     "r"(static_cast<unsigned>(__cvta_generic_to_shared(exp_s + b0))), "r"(b1 - b0)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      }
    }
    __syncthreads();
    cluster_sync_acq_rel();
    asm volatile("fence.proxy.async.global;" ::: "memory");  // the acquired global data before async-proxy reads
    const int peer = warp;
    if (peer < csize && peer != static_cast<int>(rank) && lane < kPieces) {
      int b0, b1;
      piece_range(rank, b0, b1);
      if (b1 > b0)
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                 recv + peer * slice + (b0 - rank * slice),
                                 cluster_ws + static_cast<long>(peer) * export_bytes + b0, b1 - b0, &bar);
    }
  } else {
    for (int i = tid * 16; i < export_bytes; i += kThreads * 16)
      *reinterpret_cast<uint4*>(my_ws + i) = *reinterpret_cast<const uint4*>(exp_s + i);
    __syncthreads();
    cluster_sync_acq_rel();
    const int per_peer = mine / 16;
    for (int k = tid; k < csize * per_peer; k += kThreads) {
      const int peer = k / per_peer, i = (k % per_peer) * 16;
      if (peer == static_cast<int>(rank)) continue;
      *reinterpret_cast<uint4*>(recv + peer * slice + i) =
          *reinterpret_cast<const uint4*>(cluster_ws + static_cast<long>(peer) * export_bytes + rank * slice + i);
    }
  }
  if constexpr (Mode != 2) {
    while (!cuda::ptx::mbarrier_try_wait_parity(&bar, 0)) {
    }
  } else {
    __syncthreads();
  }
  const unsigned long long t1 = gtimer();
  if (tid == 0) {
    out[2 * blockIdx.x] = t0;
    out[2 * blockIdx.x + 1] = t1;
  }
  cluster_sync_acq_rel();  // no CTA leaves while a peer's copy may still target it
}

struct Config {
  const char* name;
  int clusters, csize, export_bytes;
};
using Kernel = void (*)(unsigned char*, int, int, unsigned long long*);

int main() {
  const Config configs[] = {
      {"swap-AB T=1 h16: 1 cluster of 10, 32 KB", 1, 10, 32768},
      {"swap-AB T=1 h32: 1 cluster of 10, 64 KB", 1, 10, 65536},
      {"swap-AB T=16 h16: 16 clusters of 6, 32 KB", 16, 6, 32768},
      {"swap-AB T=16 h32: 16 clusters of 6, 64 KB", 16, 6, 65536},
      {"swap-AB T=8 h16: 8 clusters of 8, 32 KB", 8, 8, 32768},
      {"head-padded-like: 1 cluster of 5, 96 KB", 1, 5, 98304},
      {"head-padded-like: 16 clusters of 5, 96 KB", 16, 5, 98304},
  };
  const Kernel kernels[] = {merge_probe<0>, merge_probe<1>, merge_probe<2>};
  const char* mode_names[] = {"DSMEM push", "L2 by TMA", "L2 generic"};
  const int kMaxSmem = 2 * 98304 + 1024;
  unsigned char* ws;
  unsigned long long* out;
  CHECK(cudaMalloc(&ws, 16l * 10 * 98304));
  CHECK(cudaMalloc(&out, 2 * 160 * sizeof(unsigned long long)));
  for (Kernel k : kernels) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  std::printf("%-46s %-12s %10s %10s  (ns from the publishing barrier until every slice landed; median of 200)\n",
              "shape", "mode", "grid span", "CTA");
  for (const Config& c : configs) {
    for (int m = 0; m < 3; ++m) {
      std::vector<double> span, cta;
      const int ctas = c.clusters * c.csize;
      std::vector<unsigned long long> h(2 * ctas);
      for (int launch = 0; launch < 210; ++launch) {
        launch_clustered(kernels[m], ctas, c.csize, kThreads, 2 * c.export_bytes + 1024, ws, c.export_bytes, c.csize,
                         out);
        CHECK(cudaDeviceSynchronize());
        if (launch < 10) continue;
        CHECK(cudaMemcpy(h.data(), out, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        unsigned long long lo = ~0ull, hi = 0;
        std::vector<double> per;
        for (int b = 0; b < ctas; ++b) {
          lo = std::min(lo, h[2 * b]);
          hi = std::max(hi, h[2 * b + 1]);
          per.push_back(double(h[2 * b + 1] - h[2 * b]));
        }
        span.push_back(double(hi - lo));
        cta.push_back(median(per));
      }
      std::printf("%-46s %-12s %10.0f %10.0f\n", c.name, mode_names[m], median(span), median(cta));
      std::fflush(stdout);  // a pipe (tee) buffers fully: a hang later must not swallow the finished lines
    }
  }
  return 0;
}
