// launch_floor_probe.cu: what the launch of a decode-shaped kernel costs per call in the bench's graph, and
// whether the L1 / shared-memory carve-out the driver picks for the Q writer is part of it (session 23).
// Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Question. `swapjit bench` times graphs of 16 x (Q writer, decode kernel). The writer (a copy) declares no
// shared memory; both decode kernels take ~200 KB a CTA. An SM's unified L1 / shared memory is split by a
// carve-out chosen per launch, and a launch whose carve-out differs from the SM's current one "may insert a
// device-side synchronization point" (cuFuncSetCacheConfig's documentation). If the driver gives the writer a
// small carve-out (more L1), every call pays two reconfigurations, and the bench's empty-kernel floor (an
// empty kernel with no shared memory) does not show them. A Q projection in a model is a GEMM with a large
// carve-out, so the bench's writer would then overstate both kernels' per-call times by the same amount.
//
// Graphs of 16 x (copy of 36 KB, the Q of 32 heads; then an empty kernel shaped as a decode step), replayed
// 30 times, median replay / 16, for: the empty kernel's dynamic smem (0 or 200 KB), its cluster (none, or 10
// CTAs with the PDL attribute as swapjit launches), its own carve-out preference, and the writer's carve-out
// preference (default, 0 = max L1, 100 = max shared). Also a back-to-back pair of the empty kernel alone.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "probe_common.cuh"

__global__ void copy16(const uint4* src, uint4* dst, unsigned long long n16) {
  for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < n16; i += gridDim.x * 256ull) dst[i] = src[i];
}

// Declares dynamic smem only through the launch; touches nothing (a decode kernel's launch without its work).
__global__ void empty_decode(int* sink) {
  extern __shared__ int smem[];
  if (sink != nullptr && threadIdx.x == 0 && blockIdx.x == 0) sink[0] = smem[0];  // never taken
}

struct Config {
  const char* name;
  int smem;              // the empty kernel's dynamic smem
  int cluster;           // 0: plain launch; else cluster size + PDL attribute
  int writer_carveout;   // -2: no copy at all; -1: default; else percent
  int decode_carveout;   // -1: default; else percent
};

int main() {
  constexpr int kCalls = 16, kReplays = 30, kCtas = 10, kThreads = 512;
  constexpr size_t kQBytes = 32 * 576 * 2;
  const unsigned long long n16 = kQBytes / 16;
  uint4 *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, kQBytes * kCalls));
  CHECK(cudaMalloc(&dst, kQBytes * kCalls));
  CHECK(cudaMemset(src, 1, kQBytes * kCalls));
  CHECK(cudaFuncSetAttribute(empty_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CHECK(cudaFuncSetAttribute(empty_decode, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const Config configs[] = {
      {"copy + empty, 0 smem, plain", 0, 0, -1, -1},
      {"copy + empty, 200 KB, plain", 200 * 1024, 0, -1, -1},
      {"copy + empty, 0 smem, cluster 10 + PDL", 0, kCtas, -1, -1},
      {"copy + empty, 200 KB, cluster 10 + PDL", 200 * 1024, kCtas, -1, -1},
      {"  writer carve-out 100 (max shared)", 200 * 1024, kCtas, 100, -1},
      {"  writer carve-out 0 (max L1)", 200 * 1024, kCtas, 0, -1},
      {"  empty carve-out 100, writer default", 200 * 1024, kCtas, -1, 100},
      {"  both carve-outs 100", 200 * 1024, kCtas, 100, 100},
      {"copy + empty, 0 smem, cluster 10, writer 100", 0, kCtas, 100, -1},
      {"empty alone, 200 KB, cluster 10 + PDL", 200 * 1024, kCtas, -2, -1},
      {"empty alone, 0 smem, cluster 10 + PDL", 0, kCtas, -2, -1},
  };
  std::printf("per call = median graph replay / %d (us); the graph: %d x (copy of %zu B, empty kernel of %d x %d threads)\n",
              kCalls, kCalls, kQBytes, kCtas, kThreads);
  for (const Config& c : configs) {
    // Carve-outs are function attributes: set them for this configuration (-1 resets to no preference).
    CHECK(cudaFuncSetAttribute(copy16, cudaFuncAttributePreferredSharedMemoryCarveout,
                               c.writer_carveout >= 0 ? c.writer_carveout : -1));
    CHECK(cudaFuncSetAttribute(empty_decode, cudaFuncAttributePreferredSharedMemoryCarveout,
                               c.decode_carveout >= 0 ? c.decode_carveout : -1));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kCalls; ++i) {
      if (c.writer_carveout != -2) {
        copy16<<<unsigned((n16 + 255) / 256), 256, 0, s>>>(src + i * n16, dst + i * n16, n16);
        CHECK(cudaGetLastError());
      }
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kCtas);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = c.smem;
      cfg.stream = s;
      cudaLaunchAttribute attr[2];
      int n = 0;
      if (c.cluster > 0) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = c.cluster;
        attr[n].val.clusterDim.y = attr[n].val.clusterDim.z = 1;
        ++n;
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n].val.programmaticStreamSerializationAllowed = 1;
        ++n;
      }
      cfg.attrs = attr;
      cfg.numAttrs = n;
      CHECK(cudaLaunchKernelEx(&cfg, empty_decode, static_cast<int*>(nullptr)));
    }
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int r = 0; r < kReplays + 3; ++r) {
      CHECK(cudaEventRecord(e0, s));
      CHECK(cudaGraphLaunch(ge, s));
      CHECK(cudaEventRecord(e1, s));
      CHECK(cudaStreamSynchronize(s));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) us.push_back(ms * 1e3 / kCalls);
    }
    std::printf("%-48s %7.3f us a call (min %.3f)\n", c.name, median(us), *std::min_element(us.begin(), us.end()));
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
  }
  return 0;
}
