// probe_common.cuh: what every probe of tools/probes/ shares: a CUDA runtime error check that names the
// call and exits, the %globaltimer read the timings use, the CTA's cluster rank and a peer's copy of a
// shared-memory address (mapa), a clustered launch, the median of a sample, the best-of-5 cycle count of a
// one-CTA rate kernel, the CTA's SM, and the kernels' exact e4m3 decode.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g)::"memory");
  return g;
}

// The SM this CTA runs on.
__device__ __forceinline__ unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// The address of `p`'s copy in the shared memory of cluster CTA `rank` (DSMEM).
template <class T>
__device__ __forceinline__ T* map_rank(T* p, unsigned rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
  return reinterpret_cast<T*>(r);
}

// The median of a sample (0 when it is empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The launch configuration of `ctas` CTAs of `threads` threads in clusters of `cluster` (non-portable sizes
// need the kernel's cudaFuncAttributeNonPortableClusterSizeAllowed) with `smem` bytes of dynamic shared memory,
// for cudaLaunchKernelEx and cudaOccupancyMaxActiveClusters. Not copyable: cfg points at its own attribute.
struct ClusterConfig {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  ClusterConfig(int ctas, int cluster, int threads, int smem) {
    cfg.gridDim = dim3(ctas);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  ClusterConfig(const ClusterConfig&) = delete;
  ClusterConfig& operator=(const ClusterConfig&) = delete;
};

// Launches k with ClusterConfig(ctas, cluster, threads, smem).
template <class... Params, class... Args>
void launch_clustered(void (*k)(Params...), int ctas, int cluster, int threads, int smem, Args... args) {
  const ClusterConfig c(ctas, cluster, threads, smem);
  CHECK(cudaLaunchKernelEx(&c.cfg, k, static_cast<Params>(args)...));
}

// The smallest of 5 launches' cycle counts: `launch(rep)` starts one (rep = 0..4) that writes its cycles to
// d_cycles.
template <class Launch>
long long best_cycles(Launch launch, long long* d_cycles) {
  long long best = 1ll << 60;
  for (int rep = 0; rep < 5; ++rep) {
    launch(rep);
    CHECK(cudaGetLastError());
    long long c = 0;
    CHECK(cudaMemcpy(&c, d_cycles, sizeof(c), cudaMemcpyDeviceToHost));
    if (c < best) best = c;
  }
  return best;
}

// The kernels' exact decode (decode_common.cuh e4m3x4_scaled): the 4 e4m3 codes of w times mult -> two bf16x2
// (first code in the low half). Standalone: probes cannot include the NVRTC prelude.
__device__ __forceinline__ void e4m3x4_scaled(unsigned w, float mult, unsigned& out01, unsigned& out23) {
  float f[4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unsigned h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<unsigned short>(w >> (16 * h))));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f[2 * h]) : "h"(static_cast<unsigned short>(h2 & 0xFFFFu)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f[2 * h + 1]) : "h"(static_cast<unsigned short>(h2 >> 16)));
  }
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out01) : "f"(f[1] * mult), "f"(f[0] * mult));
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out23) : "f"(f[3] * mult), "f"(f[2] * mult));
}
