// residency_probe.cu: how many thread-block clusters the H200 holds at once when a CTA takes a whole SM, and
// when two CTAs fit an SM (docs/perf-notes.md, session 36). Built and run by scripts/device_probe.sh (nvcc
// -arch=sm_90a; not part of the library).
//
// Question. Every swap-AB key runs 512 threads with 71-114 registers and 99-218 KB of smem, so one CTA a SM,
// and the bench's occupancy table says 17 clusters of 6, 15 of 7 and 8, 7 of 10-16 fit at once: a T = 16 step
// (16 clusters) gets at most 6 CTAs a token. Would a kernel whose CTAs fit two a SM (fewer registers a thread or
// fewer threads, <= ~113 KB of smem) hold 16 clusters of 8 or 10, and does the hardware then really run them all
// at once, putting two CTAs of a cluster (or of two clusters) on one SM?
//
// Method. A kernel that does nothing but record its SM (%smid) and the %globaltimer at its
// start, spin ~30 us, and record the timer again. For each configuration (threads, dynamic smem, cluster size):
// cudaOccupancyMaxActiveClusters, then one launch of G clusters: the SMs used, the most CTAs on one SM, and
// whether every CTA started before the first one finished (all resident at once).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "probe_common.cuh"

struct Rec {
  unsigned smid;
  unsigned long long t0, t1;
};

__global__ void resident_kernel(Rec* out, unsigned long long spin_ns) {
  extern __shared__ unsigned char smem[];
  const unsigned long long t0 = gtimer();
  if (threadIdx.x == 0) smem[0] = 1;  // touch the allocation
  while (gtimer() - t0 < spin_ns) {
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = Rec{sm_id(), t0, gtimer()};
}

int main() {
  CHECK(cudaFuncSetAttribute(resident_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024));
  CHECK(cudaFuncSetAttribute(resident_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaFuncAttributes fa{};
  CHECK(cudaFuncGetAttributes(&fa, resident_kernel));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("probe kernel: %d registers a thread; %d SMs\n", fa.numRegs, sms);
  struct Cfg {
    int threads, smem_kb, cluster, clusters;
  };
  // One CTA a SM (today's kernels: 200 KB), then two a SM by smem (100 KB) at 512 and 256 threads.
  const Cfg cfgs[] = {{512, 200, 6, 16}, {512, 200, 8, 15}, {512, 200, 10, 7},  {512, 100, 6, 16},
                      {512, 100, 7, 16}, {512, 100, 8, 16}, {512, 100, 10, 8},  {512, 100, 10, 14},
                      {256, 100, 8, 16}, {256, 100, 10, 8}, {256, 100, 10, 16}, {512, 100, 16, 8}};
  std::printf("%7s %6s %7s %10s | %8s %8s %6s %10s %12s\n", "threads", "smem", "cluster", "max active", "launched",
              "SMs used", "max/SM", "all at once", "span us");
  Rec* d = nullptr;
  CHECK(cudaMalloc(&d, 4096 * sizeof(Rec)));
  for (const Cfg& c : cfgs) {
    const int smem = c.smem_kb * 1024;
    const ClusterConfig q(c.cluster, c.cluster, c.threads, smem);
    int active = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&active, resident_kernel, &q.cfg));
    const int ctas = c.clusters * c.cluster;
    launch_clustered(resident_kernel, ctas, c.cluster, c.threads, smem, d, 30000ull);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<Rec> h(static_cast<size_t>(ctas));
    CHECK(cudaMemcpy(h.data(), d, h.size() * sizeof(Rec), cudaMemcpyDeviceToHost));
    std::map<unsigned, int> per_sm;
    unsigned long long first_end = ~0ull, last_start = 0, t_min = ~0ull, t_max = 0;
    for (const Rec& r : h) {
      ++per_sm[r.smid];
      first_end = std::min(first_end, r.t1);
      last_start = std::max(last_start, r.t0);
      t_min = std::min(t_min, r.t0);
      t_max = std::max(t_max, r.t1);
    }
    int max_per_sm = 0;
    for (const auto& kv : per_sm) max_per_sm = std::max(max_per_sm, kv.second);
    std::printf("%7d %4d KB %7d %10d | %8d %8zu %6d %10s %12.1f\n", c.threads, c.smem_kb, c.cluster, active,
                c.clusters, per_sm.size(), max_per_sm, last_start < first_end ? "yes" : "no",
                (t_max - t_min) / 1e3);
  }
  CHECK(cudaFree(d));
  return 0;
}
