// e4m3_decode_probe.cu: is there a cheaper exact e4m3 x 2^(s-127) -> bf16 decode than the kernels' cvt path
// (docs/perf-notes.md, session 9 "Next" 1)? Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Why. At 96- and 128-slot tiles the swap-AB gather is bound by the decode's instruction issue (~58 SASS
// instructions, ~88 issue cycles, a 16-dim piece: session 9). The candidate needs no cvt: per pair of codes
//   x = prmt(w, 0, 0x4140 or 0x4342)         [b, 0, b', 0]: each code in the low byte of a 16-bit half
//   y = 16 x + 240 (x & 0x00800080)          magnitude -> bf16 bits 4..10, sign bit 7 -> bit 15 (no carry between halves)
//   r = mul.rn.bf16x2(y, 2^(s - 7) as bf16x2) y is the code's value times 2^-120; one exact multiply rebiases and scales
// Its open points, which this probe answers:
//   1. exactness on the GPU: e4m3 subnormal codes make y a bf16 subnormal, which HMUL2.BF16 must not flush;
//      compared bit for bit with the cvt path for every code, every scale byte s <= 134 (2^(s-7) must be a
//      normal bf16), NaN codes (0x7F, 0xFF) left out (they come out finite here: the kernels would need a check);
//   2. issue cost per 16-dim piece against the cvt path, with and without a per-piece NaN-code check.
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_common.cuh"

__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
__device__ __forceinline__ unsigned mul_bf16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned int_pair(unsigned x, unsigned mult2) {
  return mul_bf16x2(16u * x + 240u * (x & 0x00800080u), mult2);
}
__device__ __forceinline__ void int_path(unsigned w, unsigned mult2, unsigned& o01, unsigned& o23) {
  o01 = int_pair(prmt(w, 0u, 0x4140u), mult2);
  o23 = int_pair(prmt(w, 0u, 0x4342u), mult2);
}
__device__ __forceinline__ float ue8m0(unsigned s) { return __uint_as_float(s == 0 ? 0x00400000u : s << 23); }
__device__ __forceinline__ unsigned bf16x2_pow2(unsigned s) { return ((s + 120u) << 7) * 0x10001u; }  // 2^(s-7)
__device__ __forceinline__ bool is_nan_code(unsigned c) { return (c & 0x7Fu) == 0x7Fu; }

// Block s (scale byte), thread c: the word of codes c, c+1, c+2, c+3 (mod 256).
__global__ void exactness(unsigned* mismatches /* [2]: all, subnormal codes */) {
  const unsigned s = blockIdx.x, c = threadIdx.x;
  const unsigned w = c | ((c + 1) & 255) << 8 | ((c + 2) & 255) << 16 | ((c + 3) & 255) << 24;
  unsigned a01, a23, b01, b23;
  e4m3x4_scaled(w, ue8m0(s), a01, a23);
  int_path(w, bf16x2_pow2(s), b01, b23);
  const unsigned a[4] = {a01 & 0xFFFF, a01 >> 16, a23 & 0xFFFF, a23 >> 16};
  const unsigned b[4] = {b01 & 0xFFFF, b01 >> 16, b23 & 0xFFFF, b23 >> 16};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned code = (c + k) & 255;
    if (is_nan_code(code) || a[k] == b[k]) continue;
    atomicAdd(&mismatches[0], 1u);
    if (((code >> 3) & 15) == 0) atomicAdd(&mismatches[1], 1u);
    if (atomicAdd(&mismatches[2], 1u) < 8)
      printf("  mismatch: s %u code 0x%02x: cvt 0x%04x, int 0x%04x\n", s, code, a[k], b[k]);
  }
}

// One CTA of 512 threads decodes kPieces 16-dim pieces a thread from registers, kReps times (independent pieces).
constexpr int kThreads = 512, kPieces = 4, kReps = 64;
template <int Path>  // 0 cvt, 1 int, 2 int + NaN-code and scale checks (fast path taken)
__global__ void __launch_bounds__(kThreads, 1) throughput(unsigned seed, unsigned* sink, long long* cycles) {
  uint4 raw[kPieces];
  unsigned sc[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const unsigned v = (seed + threadIdx.x * 977u + i * 131u) * 0x9E3779B1u;
    raw[i] = make_uint4(v & 0x76767676u, (v >> 3) & 0x76767676u, (v >> 5) & 0x76767676u, (v >> 7) & 0x76767676u);
    sc[i] = 100 + (v >> 28);
  }
  unsigned acc = 0;
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 1
  for (int r = 0; r < kReps; ++r) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const unsigned w[4] = {raw[i].x ^ r, raw[i].y ^ r, raw[i].z ^ r, raw[i].w ^ r};
      unsigned o[8];
      if constexpr (Path == 0) {
        const float mult = ue8m0(sc[i]);
#pragma unroll
        for (int k = 0; k < 4; ++k) e4m3x4_scaled(w[k], mult, o[2 * k], o[2 * k + 1]);
      } else {
        bool fast = true;
        if constexpr (Path == 2) {
          const unsigned t = ((w[0] & 0x7F7F7F7Fu) + 0x01010101u) | ((w[1] & 0x7F7F7F7Fu) + 0x01010101u) |
                             ((w[2] & 0x7F7F7F7Fu) + 0x01010101u) | ((w[3] & 0x7F7F7F7Fu) + 0x01010101u);
          fast = (t & 0x80808080u) == 0 && sc[i] <= 134;
        }
        if (fast) {
          const unsigned m2 = bf16x2_pow2(sc[i]);
#pragma unroll
          for (int k = 0; k < 4; ++k) int_path(w[k], m2, o[2 * k], o[2 * k + 1]);
        } else {
          const float mult = ue8m0(sc[i]);
#pragma unroll
          for (int k = 0; k < 4; ++k) e4m3x4_scaled(w[k], mult, o[2 * k], o[2 * k + 1]);
        }
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += o[k];
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  if (acc == 0x12345678u) sink[threadIdx.x] = acc;  // keeps the work alive
  if (threadIdx.x == 0) *cycles = t1 - t0;
}

template <int Path>
static void run(const char* name, unsigned* sink, long long* d_cycles) {
  const long long best =
      best_cycles([&](int rep) { throughput<Path><<<1, kThreads>>>(rep + 1, sink, d_cycles); }, d_cycles);
  const double warp_pieces = double(kThreads / 32) * kPieces * kReps;
  std::printf("%-46s %8lld cycles  %6.1f cycles a warp-piece an SM (x4 schedulers: %5.1f)\n", name, best,
              double(best) / warp_pieces, 4.0 * double(best) / warp_pieces);
}

int main() {
  unsigned* mism;
  CHECK(cudaMalloc(&mism, 3 * sizeof(unsigned)));
  CHECK(cudaMemset(mism, 0, 3 * sizeof(unsigned)));
  exactness<<<135, 256>>>(mism);  // scale bytes 0..134
  CHECK(cudaGetLastError());
  unsigned h[3];
  CHECK(cudaMemcpy(h, mism, sizeof(h), cudaMemcpyDeviceToHost));
  std::printf("exactness, 135 scale bytes x 254 non-NaN codes: %u mismatches (%u of them subnormal codes)\n", h[0], h[1]);
  unsigned* sink;
  long long* d_cycles;
  CHECK(cudaMalloc(&sink, kThreads * sizeof(unsigned)));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  run<0>("cvt path (the kernels')", sink, d_cycles);
  run<1>("integer path", sink, d_cycles);
  run<2>("integer path + NaN-code and scale checks", sink, d_cycles);
  return 0;
}
