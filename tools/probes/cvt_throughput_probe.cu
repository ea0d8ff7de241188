// cvt_throughput_probe.cu: issue rate of the instructions of the records' exact decode on one SM
// (docs/perf-notes.md, session 8). Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Question. The swap-AB gather takes ~1.5 us after the slot ids for a 64-slot tile whose loads alone take
// ~0.75 us in a probe (gpc_gather_probe.cu). Its decode runs, per 2 dims, one e4m3x2 -> f16x2 cvt, two
// f16 -> f32 cvts, two fp32 multiplies and one f32x2 -> bf16x2 cvt. If the conversions issue at a fraction
// of the FMA rate, the decode, not the loads, sets the gather's time.
// Each kernel: one CTA of 512 threads (16 warps, 4 a scheduler, as the decode kernels), 8 independent
// chains a thread, 512 steps; reports lane-operations per clock per SM (warp instructions x 32 / cycles).
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_common.cuh"

constexpr int kThreads = 512, kChains = 8, kSteps = 512;

template <int Op>
__device__ __forceinline__ unsigned step(unsigned x, unsigned k) {
  unsigned r;
  if constexpr (Op == 0) {  // e4m3x2 -> f16x2
    asm volatile("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(static_cast<unsigned short>(x)));
  } else if constexpr (Op == 1) {  // f16 -> f32
    float f;
    asm volatile("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(x)));
    r = __float_as_uint(f);
  } else if constexpr (Op == 2) {  // f32 x 2 -> bf16x2
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(x)), "f"(__uint_as_float(k)));
  } else if constexpr (Op == 3) {  // fp32 multiply
    float f;
    asm volatile("mul.rn.f32 %0, %1, %2;" : "=f"(f) : "f"(__uint_as_float(x)), "f"(__uint_as_float(k)));
    r = __float_as_uint(f);
  } else if constexpr (Op == 4) {  // byte permute
    asm volatile("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(r) : "r"(x), "r"(k));
  } else if constexpr (Op == 5) {  // bf16x2 multiply
    asm volatile("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k));
  } else if constexpr (Op == 6) {  // 3-input logic
    asm volatile("lop3.b32 %0, %1, %2, 0x0F0F0F0F, 0xE8;" : "=r"(r) : "r"(x), "r"(k));
  } else {  // f32 -> f16x2 pack (another F2FP form)
    asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(x)), "f"(__uint_as_float(k)));
  }
  return r;
}

template <int Op>
__global__ void __launch_bounds__(kThreads, 1) rate(unsigned seed, unsigned* sink, long long* cycles) {
  unsigned v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = seed * (threadIdx.x + 1) + c * 0x01010101u;
  const unsigned k = seed ^ 0x3F803F80u;
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 4
  for (int i = 0; i < kSteps; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) v[c] = step<Op>(v[c], k);
  }
  __syncthreads();
  const long long t1 = clock64();
  unsigned acc = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc ^= v[c];
  if (acc == 0x12345678u) sink[threadIdx.x] = acc;  // keeps the chains alive
  if (threadIdx.x == 0) *cycles = t1 - t0;
}

template <int Op>
static int run(const char* name, unsigned* sink, long long* d_cycles) {
  const long long best =
      best_cycles([&](int rep) { rate<Op><<<1, kThreads>>>(0x3C003C00u + rep, sink, d_cycles); }, d_cycles);
  const double ops = double(kThreads) * kChains * kSteps;
  std::printf("%-34s %8lld cycles  %6.1f lane-ops / clock / SM\n", name, best, ops / double(best));
  return 0;
}

int main() {
  unsigned* sink;
  long long* d_cycles;
  CHECK(cudaMalloc(&sink, kThreads * sizeof(unsigned)));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  int rc = 0;
  rc |= run<0>("cvt.rn.f16x2.e4m3x2", sink, d_cycles);
  rc |= run<1>("cvt.f32.f16", sink, d_cycles);
  rc |= run<2>("cvt.rn.bf16x2.f32", sink, d_cycles);
  rc |= run<7>("cvt.rn.f16x2.f32", sink, d_cycles);
  rc |= run<3>("mul.rn.f32", sink, d_cycles);
  rc |= run<4>("prmt.b32", sink, d_cycles);
  rc |= run<5>("mul.rn.bf16x2", sink, d_cycles);
  rc |= run<6>("lop3.b32", sink, d_cycles);
  return rc;
}
