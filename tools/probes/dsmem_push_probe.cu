// dsmem_push_probe.cu: what a push merge's st.async stores cost right after a cluster barrier
// (docs/perf-notes.md, session 19). Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a; not part of
// the library).
//
// Question. In the swap-AB kernel at 4 or 8 heads (10-CTA clusters, T = 1) thread 0's pushes are issued
// ~450-510 ns after the publishing cluster barrier and every slice has landed ~830 ns after it, whether a CTA
// sends 6 KB or 12 KB; even the (m, L) rows (64 B from each peer, pushed first) land ~540 ns after it. A
// per-peer first access (a DSMEM touch beforehand) and the barrier wait's acquire (mbarriers instead) did not
// change it (session 19 runs 2-3). Is it the st.async stores themselves: the first after a cluster barrier,
// or any store while every thread of every CTA pushes at once?
//
// Method. Clusters of C CTAs of 512 threads (one a SM), each with a receive area of (C - 1) slices of B bytes
// on one mbarrier (one local arrival with the expected bytes). Thread 0 reads %clock64 at t0 right after the
// "publishing" barrier, at t1 after its own pushes were issued, at t2 when every slice had landed. Modes:
//   0 kernel: __syncthreads + cluster barrier (relaxed arrive), then thread groups of 512 / (C - 1) push one
//   peer
//     each its B bytes in 16-B st.async (the kernels' dc::push_mapped), all peers at once.
//   1 delayed: as 0, with every thread spinning 4,000 cycles (~2 us) between the barrier and t0: the
//   barrier's
//     aftermath (its wait's CCTL.IVALL, the other CTAs' arrival) is long over when the pushes start.
//   2 single: as 0, but only thread 0 pushes, one 16-B store to the next rank (B ignored).
//   3 second round: mode 0 twice on two mbarriers, timed on the second (the first round warms everything).
//   4 warmed apart: as 0, after every CTA sent each peer one 16-B st.async into a separate 256-B landing area
//   on
//     a separate mbarrier (right after the first cluster barrier, waited for before the timed round).
//   5 warmed in place: as 4, the 16-B warm-up store into the sender's own slot of the receive area.
//   6 warmed by all: as 4, but every thread sends its group's peer one 16-B store (a landing area of C x 512
//   / (C - 1)
//     x 16 B after the receive area).
//   7 warmed by warps: as 4, but lane 0 of every warp sends its group's peer one 16-B store.
//   8 plain stores (session 23): as 0, but the pushes are plain 16-B stores through the peer's generic DSMEM
//     address (no mbarrier), made visible by a second cluster barrier (arrive.release / wait.acquire): t2
//     after that barrier. Does a warp's first remote store cost what its first st.async does?
//   9 plain, second round: mode 8 twice, timed on the second.
// Median over the cluster's CTAs, then the median of 5 launches; cycles at the SM clock.
// Answer (H200, session 19 runs 6-8): each warp's first st.async of the launch is slow. Modes 1, 4 and 5
// match mode 0 (~800-900 cycles to issue); 6 and 7 match 3 (~360), and their slices land 330-370 cycles
// sooner. Session 34 (the second table): at the 8-head key's slice sizes the first round lands at 1,554-1,684
// cycles for 12-13 CTAs against 1,601 for 10, and 1,933 for 16; clusters of 10 to 16 CTAs all fit 7 at once.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.cuh"

constexpr int kThreads = 512, kMaxCluster = 16;

__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ unsigned long long clk() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

// Every thread group pushes its peer `bytes` from src into the peer's recv slot of this rank, onto bar.
__device__ __forceinline__ void push_all(unsigned char* recv, const unsigned char* src, int bytes,
                                         uint64_t* bar, int csize, unsigned rank, int tid) {
  const int group = kThreads / (csize - 1), q = tid / group, idx = tid - q * group;
  if (q >= csize - 1) return;
  const unsigned peer = (rank + 1 + q) % csize;
  unsigned char* dst = map_rank(recv + rank * bytes, peer);
  uint64_t* rbar = map_rank(bar, peer);
  for (int off = 16 * idx; off < bytes; off += 16 * group) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + off);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    cuda::ptx::st_async(reinterpret_cast<uint32_t*>(dst + off), w, rbar);
  }
}

// As push_all, with plain generic stores to the peer's shared memory (completion: a cluster barrier).
__device__ __forceinline__ void push_all_plain(unsigned char* recv, const unsigned char* src, int bytes, int csize,
                                               unsigned rank, int tid) {
  const int group = kThreads / (csize - 1), q = tid / group, idx = tid - q * group;
  if (q >= csize - 1) return;
  const unsigned peer = (rank + 1 + q) % csize;
  unsigned char* dst = map_rank(recv + rank * bytes, peer);
  for (int off = 16 * idx; off < bytes; off += 16 * group) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + off);
    asm volatile("st.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst + off), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
}

template <int Mode>
__global__ void __launch_bounds__(kThreads, 1) push_probe(int csize, int bytes, unsigned long long* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* src = smem;                            // [bytes] what this CTA sends (contents irrelevant)
  unsigned char* recv = smem + (bytes + 15) / 16 * 16;  // [csize][bytes] by sender rank
  __shared__ alignas(8) uint64_t bar[2], bar_w;
  __shared__ alignas(16) unsigned char land[kMaxCluster * 16];
  const int tid = threadIdx.x;
  const unsigned rank = cluster_rank();
  for (int i = tid * 16; i < bytes; i += kThreads * 16)
    *reinterpret_cast<uint4*>(src + i) = make_uint4(i, rank, 1, 2);
  const int expect = Mode == 2 ? 16 : (csize - 1) * bytes;
  if (tid < 2) {
    cuda::ptx::mbarrier_init(&bar[tid], 1);
    if (tid == 0) cuda::ptx::mbarrier_init(&bar_w, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
  if (Mode >= 6) {
    // Senders: threads [q G, (q + 1) G) of every CTA target peer rank + 1 + q, into [sender rank][G] x 16 B
    // of a landing area after the receive area. bar_w is armed for 0 bytes (its phase completes at once and
    // the warm stores' bytes go to its next phase, never waited on): a spin and a cluster barrier order them
    // instead.
    const int group = kThreads / (csize - 1), q = tid / group, idx = tid - q * group;
    unsigned char* land8 = recv + csize * bytes;  // [csize][group] x 16 B
    if (tid == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &bar_w, 0u);
    __syncthreads();
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
    if (q < csize - 1 && (Mode == 6 || tid % 32 == 0)) {
      const unsigned peer = (rank + 1 + q) % csize;
      const uint32_t w[4] = {5, 6, 7, 8};
      cuda::ptx::st_async(reinterpret_cast<uint32_t*>(map_rank(land8 + (rank * group + idx) * 16, peer)), w,
                          map_rank(&bar_w, peer));
    }
    // No wait on bar_w's bytes (the count differs by rank for mode 7): a cluster barrier after a spin
    // instead.
    const unsigned long long s0 = clk();
    while (clk() - s0 < 3000) {
    }
    __syncthreads();
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  } else if (Mode >= 4) {
    if (tid == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &bar_w, 16u * (csize - 1));
    if (tid < csize - 1) {
      const unsigned peer = (rank + 1 + tid) % csize;
      const uint32_t w[4] = {5, 6, 7, 8};
      unsigned char* slot = Mode == 4 ? land + rank * 16 : recv + rank * bytes;
      cuda::ptx::st_async(reinterpret_cast<uint32_t*>(map_rank(slot, peer)), w, map_rank(&bar_w, peer));
    }
    while (!cuda::ptx::mbarrier_try_wait_parity(&bar_w, 0)) {
    }
  }
  const int rounds = Mode == 3 || Mode == 9 ? 2 : 1;
  unsigned long long t0 = 0, t1 = 0, t2 = 0;
  for (int r = 0; r < rounds; ++r) {
    if (tid == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                           cuda::ptx::space_shared, &bar[r], static_cast<uint32_t>(expect));
    __syncthreads();
    cluster_sync_relaxed();  // the kernels' publishing barrier
    if (Mode == 1) {
      const unsigned long long s = clk();
      while (clk() - s < 4000) {
      }
    }
    t0 = clk();
    if (Mode == 2) {
      if (tid == 0) {
        const uint32_t w[4] = {1, 2, 3, 4};
        const unsigned peer = (rank + 1) % csize;
        cuda::ptx::st_async(reinterpret_cast<uint32_t*>(map_rank(recv, peer)), w, map_rank(&bar[r], peer));
      }
    } else if (Mode >= 8) {
      push_all_plain(recv, src, bytes, csize, rank, tid);
    } else {
      push_all(recv, src, bytes, &bar[r], csize, rank, tid);
    }
    t1 = clk();
    if (Mode >= 8) {
      asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    } else {
      while (!cuda::ptx::mbarrier_try_wait_parity(&bar[r], 0)) {
      }
    }
    t2 = clk();
  }
  if (tid == 0) {
    out[3 * blockIdx.x] = t0;
    out[3 * blockIdx.x + 1] = t1;
    out[3 * blockIdx.x + 2] = t2;
  }
  cluster_sync_relaxed();  // no CTA leaves while a peer's stores may still target it
}

int main() {
  using Kernel = void (*)(int, int, unsigned long long*);
  constexpr int kModes = 10;
  const Kernel kernels[kModes] = {push_probe<0>, push_probe<1>, push_probe<2>, push_probe<3>, push_probe<4>,
                                  push_probe<5>, push_probe<6>, push_probe<7>, push_probe<8>, push_probe<9>};
  const char* names[kModes] = {"kernel",       "delayed 4000 cyc", "single 16 B",     "second round",
                               "warmed apart", "warmed in place",  "warmed by all",   "warmed by warps",
                               "plain stores", "plain, 2nd round"};
  constexpr int kSmem = 200 * 1024;
  for (Kernel k : kernels) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  unsigned long long* d_out = nullptr;
  CHECK(cudaMalloc(&d_out, 3 * kMaxCluster * sizeof(unsigned long long)));
  std::printf(
      "one cluster; cycles from the publishing barrier (thread 0, median CTA, median of 5 launches)\n");
  std::printf("%-18s %3s %6s %8s %10s %10s\n", "mode", "C", "B/peer", "KB out", "issued", "landed");
  struct Shape {
    int csize, bytes;
  };
  // One table row: mode m at shape s, 5 launches.
  const auto row = [&](int m, const Shape& s) {
    std::vector<double> issued, landed;
    for (int rep = 0; rep < 5; ++rep) {
      launch_clustered(kernels[m], s.csize, s.csize, kThreads, kSmem, s.csize, s.bytes, d_out);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<unsigned long long> h(3 * s.csize);
      CHECK(cudaMemcpy(h.data(), d_out, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
      std::vector<double> a, b;
      for (int c = 0; c < s.csize; ++c) {
        a.push_back(static_cast<double>(h[3 * c + 1] - h[3 * c]));
        b.push_back(static_cast<double>(h[3 * c + 2] - h[3 * c]));
      }
      issued.push_back(median(a));
      landed.push_back(median(b));
    }
    std::printf("%-18s %3d %6d %8.1f %10.0f %10.0f\n", names[m], s.csize, s.bytes,
                (s.csize - 1) * s.bytes / 1024.0, median(issued), median(landed));
  };
  const Shape shapes[] = {{10, 64},   {10, 768}, {10, 1536}, {10, 3072},
                          {10, 6144}, {6, 1536}, {6, 8192},  {2, 8192}};
  for (int m = 0; m < kModes; ++m) {
    for (const Shape& s : shapes) {
      if (m == 2 && s.bytes != 1536) continue;
      row(m, s);
    }
  }
  // Session 34: would clusters of 12-16 CTAs (less of each token's 640 rows a CTA) pay for their exchange? The
  // 8-head key's packed slices: 1024 tasks of 12 B over C ranks, rounded up to whole warps of tasks. And how
  // many such clusters fit at once (a 512-thread CTA with 200 KB of smem per SM).
  std::printf("\nlarger clusters, the 8-head key's slices (modes kernel and second round)\n");
  const Shape wide[] = {{10, 1536}, {12, 1152}, {13, 1152}, {14, 1152}, {15, 1152}, {16, 768}};
  for (int m : {0, 3}) {
    for (const Shape& s : wide) {
      row(m, s);
    }
  }
  for (int c = 8; c <= kMaxCluster; ++c) {
    const ClusterConfig cc(c * 16, c, kThreads, kSmem);
    int clusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernels[0], &cc.cfg));
    std::printf("cluster of %2d CTAs (512 threads, %d KB smem): %d clusters resident\n", c, kSmem / 1024, clusters);
  }
  int khz = 0;
  CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  std::printf("SM clock attribute %d kHz\n", khz);
  CHECK(cudaFree(d_out));
  return 0;
}
