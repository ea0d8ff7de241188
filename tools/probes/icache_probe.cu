// icache_probe.cu: what a launch pays for the straight-line code it executes (docs/perf-notes.md, session 11).
// Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Question. ncu put 40 % of the head-padded kernel's stall samples and 22 % of swap-AB's on instruction fetch
// (no_inst), a third of swap-AB's on its first instruction: the code looks cold at every launch. Making
// code-size changes predictable needs two numbers: (1) the cost per KB of straight-line code executed once,
// cold, by a CTA shaped like the decode kernels (512 threads, 16 warps on 4 schedulers), and (2) whether a
// kernel's code is still cached at its next launch, with and without another kernel's code run in between.
//
// Kernels: body<N> runs N independent fp32 FMAs per thread as straight-line code (8 chains, asm volatile so
// none merge or move): N SASS instructions of 16 B, issue-bound when warm (4 warps a scheduler cover the FMA
// latency). Thread 0 stamps %clock64 after a first __syncthreads (the entry's own fetch excluded) and after a
// closing __syncthreads. Per size: (a) cold = the launch after a 256 KB "flush" kernel of other code ran on
// every SM; (b) repeat = the launch right after the same kernel; (c) after-small = after a tiny other kernel
// (the bench's Q writer plays that role). Best of 5 each; cycles and ns per KB beyond the warm rate.
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_common.cuh"

constexpr int kThreads = 512, kChains = 8;

template <int N, int Salt>
__global__ void __launch_bounds__(kThreads, 1) body(float seed, float* sink, long long* cycles) {
  float v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = seed + static_cast<float>(threadIdx.x * kChains + c);
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll
  for (int i = 0; i < N / kChains; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      // Salt changes the immediate, so kernels of the same N are different code at different addresses.
      asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(v[c]) : "f"(1.0001f), "f"(static_cast<float>(Salt + i)));
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  float acc = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc += v[c];
  if (acc == 1234.5f) sink[threadIdx.x] = acc;  // keeps the chains alive
  if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = t1 - t0;
}

__global__ void tiny(float* sink) {
  if (threadIdx.x == 1024) sink[0] = 0.f;  // never true: a launch that runs almost no code
}

// One size: N instructions, measured cold, on repeat, and after a tiny other kernel.
template <int N>
void measure(float* sink, long long* d_cycles, int ctas) {
  const auto flush = [&] {
    body<16384, 7><<<132, kThreads>>>(0.5f, sink, d_cycles);  // 256 KB of other code on every SM
    CHECK(cudaGetLastError());
  };
  const auto run = [&] { body<N, 1><<<ctas, kThreads>>>(0.25f, sink, d_cycles); };
  const auto read = [&] {
    CHECK(cudaGetLastError());
    long long c = 0;
    CHECK(cudaMemcpy(&c, d_cycles, sizeof(c), cudaMemcpyDeviceToHost));
    return c;
  };
  long long cold = 1ll << 60, repeat = 1ll << 60, after_small = 1ll << 60;
  for (int rep = 0; rep < 5; ++rep) {
    flush();
    run();
    const long long c = read();
    cold = c < cold ? c : cold;
    run();
    const long long r = read();
    repeat = r < repeat ? r : repeat;
    tiny<<<ctas, 128>>>(sink);
    run();
    const long long s = read();
    after_small = s < after_small ? s : after_small;
  }
  const double kb = N * 16.0 / 1024.0;
  std::printf("%6d instr %7.1f KB  cold %8lld  repeat %8lld  after-small %8lld cycles;  cold - repeat %7.1f cycles/KB\n", N,
              kb, cold, repeat, after_small, double(cold - repeat) / kb);
}

int main() {
  float* sink;
  long long* d_cycles;
  CHECK(cudaMalloc(&sink, 132 * kThreads * sizeof(float)));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  for (int ctas : {1, 10}) {
    std::printf("grid of %d CTA(s), 512 threads each (clock64 of CTA 0, entry fetch excluded)\n", ctas);
    measure<512>(sink, d_cycles, ctas);
    measure<1024>(sink, d_cycles, ctas);
    measure<2048>(sink, d_cycles, ctas);
    measure<4096>(sink, d_cycles, ctas);
    measure<8192>(sink, d_cycles, ctas);
  }
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("SM clock attribute %d kHz; warm rate expected ~4 cycles per instruction (16 warps, 4 schedulers)\n",
              clock_khz);
  return 0;
}
