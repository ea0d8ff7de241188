// bulk_copy_probe.cu: what a CTA's bulk copies (TMA, cp.async.bulk global -> shared) cost on the H200
// (docs/perf-notes.md, session 8 "Next"). Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Question. gpc_gather_probe.cu found the gather bound by the number of LSU load instructions (one warp's
// 16-B gather load every ~15 cycles an SM), and its TMA mode (one pair of bulk copies per record, issued by
// one thread per record) took ~2 us whatever the record count (64 or 128). Is that a per-copy cost, a cost
// of the issuing pattern (how many threads / warps issue), or a fixed latency? Each configuration copies
// `copies` pieces of `bytes` each from random 512-B-aligned places of an L2-resident 2-MB buffer into smem,
// all on one mbarrier, issued by `issuers` threads (spread over warps: thread i * 32 / lanes_per_warp ...);
// the CTA's time from the first issue to the barrier's completion, median of 200 launches, one CTA.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "probe_common.cuh"

constexpr int kThreads = 512, kSmem = 96 * 1024, kSrcBytes = 2 << 20;


// Issuer k (k < issuers) is thread (k % per_warp) + 32 * (k / per_warp): `per_warp` issuing lanes a warp.
// It issues copies k, k + issuers, ... (offsets[] in 512-B units of the source).
__global__ void __launch_bounds__(kThreads, 1)
    bulk_probe(const unsigned char* src, const int* offsets, int copies, int bytes, int issuers, int per_warp,
               unsigned long long* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ alignas(8) uint64_t bar;
  const int tid = threadIdx.x;
  if (tid == 0) {
    cuda::ptx::mbarrier_init(&bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  const unsigned long long t0 = gtimer();
  if (tid == 0)
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, &bar,
                                         static_cast<uint32_t>(copies) * bytes);
  __syncthreads();
  const int lane = tid % 32, warp = tid / 32;
  const int k = lane < per_warp ? warp * per_warp + lane : -1;
  if (k >= 0 && k < issuers) {
    for (int c = k; c < copies; c += issuers) {
      unsigned char* dst = smem + (static_cast<long>(c) * bytes) % (kSmem - bytes + 1) / 16 * 16;
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src + 512l * offsets[c],
                               static_cast<uint32_t>(bytes), &bar);
    }
  }
  const unsigned long long t_iss = gtimer();
  while (!cuda::ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
  const unsigned long long t1 = gtimer();
  __syncthreads();
  if (tid == 0) {
    out[0] = t1 - t0;
    out[1] = t_iss - t0;
  }
}

struct Config {
  const char* name;
  int copies, bytes, issuers, per_warp;
};

int main() {
  const Config configs[] = {
      {"64 x 512 B, 64 issuers (2 warps x 32 lanes)", 64, 512, 64, 32},
      {"64 x 512 B, 64 issuers (16 warps x 4 lanes)", 64, 512, 64, 4},
      {"64 x 512 B, 16 issuers (16 warps x 1 lane)", 64, 512, 16, 1},
      {"64 x 512 B, 1 issuer", 64, 512, 1, 1},
      {"128 x 512 B, 128 issuers (16 warps x 8 lanes)", 128, 512, 128, 8},
      {"128 x 256 B, 128 issuers (16 warps x 8 lanes)", 128, 256, 128, 8},
      {"32 x 1024 B, 32 issuers (16 warps x 2 lanes)", 32, 1024, 32, 2},
      {"8 x 4096 B, 8 issuers (8 warps x 1 lane)", 8, 4096, 8, 1},
      {"1 x 32768 B, 1 issuer", 1, 32768, 1, 1},
      {"1 x 65536 B, 1 issuer", 1, 65536, 1, 1},
      {"16 x 16 B, 16 issuers", 16, 16, 16, 1},
  };
  std::mt19937_64 rng(11);
  std::vector<unsigned char> host(kSrcBytes);
  for (auto& b : host) b = static_cast<unsigned char>(rng());
  unsigned char* src;
  int* offsets;
  unsigned long long* out;
  CHECK(cudaMalloc(&src, kSrcBytes + 65536));
  CHECK(cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&offsets, 128 * sizeof(int)));
  CHECK(cudaMalloc(&out, 2 * sizeof(unsigned long long)));
  CHECK(cudaFuncSetAttribute(bulk_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  std::printf("%-52s %10s %10s  (ns, median of 200 launches, one CTA)\n", "configuration", "complete", "issued");
  for (const Config& c : configs) {
    std::vector<double> done, issued;
    for (int launch = 0; launch < 210; ++launch) {
      std::vector<int> off(128);
      const int span = (kSrcBytes - c.bytes) / 512;
      for (auto& o : off) o = static_cast<int>(rng() % static_cast<uint64_t>(span));
      CHECK(cudaMemcpy(offsets, off.data(), off.size() * sizeof(int), cudaMemcpyHostToDevice));
      bulk_probe<<<1, kThreads, kSmem>>>(src, offsets, c.copies, c.bytes, c.issuers, c.per_warp, out);
      CHECK(cudaGetLastError());
      unsigned long long h[2];
      CHECK(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost));
      if (launch < 10) continue;
      done.push_back(double(h[0]));
      issued.push_back(double(h[1]));
    }
    std::sort(done.begin(), done.end());
    std::sort(issued.begin(), issued.end());
    std::printf("%-52s %10.0f %10.0f\n", c.name, done[done.size() / 2], issued[issued.size() / 2]);
  }
  return 0;
}
