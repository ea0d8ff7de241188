// wgmma.cuh: small inline-PTX wrappers for sm_90a warpgroup MMA (HOPPER_NOTES §1): the 128B-swizzle
// shared-memory descriptor, fence / commit / wait, and wgmma.mma_async m64nNk16 f32 += bf16 * bf16 with
// both operands read from shared memory (CCCL has no wgmma wrapper). Only compiled into sm_90a kernels.
// NOTE: device code, compiled by NVRTC.
#pragma once

namespace swapjit {
namespace wg {

// Descriptor of a 128B-swizzled operand (HOPPER_NOTES §1.2): start address (shared window) >> 4 in bits
// 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, base offset 0 (atoms 1024-B aligned), swizzle 1 = 128B.
__device__ __forceinline__ unsigned long long sw128_desc(unsigned smem_addr, unsigned lbo_bytes, unsigned sbo_bytes) {
  return static_cast<unsigned long long>((smem_addr & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<unsigned long long>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Generic-proxy st.shared of an operand must be fenced before a barrier and the wgmma that reads it.
__device__ __forceinline__ void fence_operand_stores() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Pins accumulator registers around the asynchronous MMAs so the compiler neither reads nor moves them
// while a wgmma may still write them.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (m64 x N f32, N/2 registers a thread) += A (m64 x k16) * B (k16 x N); TransA = 1 reads A MN-major.
template <int N, int TransA>
__device__ __forceinline__ void mma_bf16(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64, "m64nNk16 for N = 8 .. 64 (heads, or hi + lo)");
  if constexpr (N == 8) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, %6, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(a), "l"(b), "n"(TransA));
  } else if constexpr (N == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %10, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b), "n"(TransA));
  } else if constexpr (N == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"
        " %16, %17, p, 1, 1, %18, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b), "n"(TransA));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,"
        "%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %34, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "n"(TransA));
  }
}

// Accumulator layout of m64nN f32 (HOPPER_NOTES §1.5): register i of thread t (warp w = t / 32 in the
// warpgroup, lane l) holds D[row][col] with these indices.
__device__ __forceinline__ int acc_row(int i) {
  const int t = threadIdx.x & 127;
  return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1);
}
__device__ __forceinline__ int acc_col(int i) { return 8 * (i >> 2) + 2 * (threadIdx.x & 3) + (i & 1); }

}  // namespace wg
}  // namespace swapjit
