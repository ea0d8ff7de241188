// gather_probe_helpers.cuh: the constants, modes and device helpers of gpc_gather_probe.cu (record
// layout, load wrappers, the decoders under test, cluster primitives). Standalone on purpose: the probe is
// built by nvcc outside the library, so it cannot include the NVRTC prelude that kernels_src/ needs.
#pragma once
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <cstdint>

#include "probe_common.cuh"
constexpr int kThreads = 512, kPage = 64, kData = 512, kScale = 16, kMaxRec = 128;
constexpr int kRecords = 4096;  // 2.1 MB of cache: L2-resident, as the bench's warm case
enum QMode { kQNone = 0, kQPerCta = 1, kQMulticast = 2 };
// How the records load: as the kernels do (16-B ld.global.nc + 1-B scale), without the scale loads, with
// the L1::no_allocate hint, as plain (L1-cached) ld.global, by cp.async (LDGSTS, 16 B data + the scale's
// 4-B word, straight to smem), or by one pair of bulk copies (512 B + 16 B) per record (TMA).
// Or the scale by a 16-B load of the record's whole scale row (a broadcast within the warp) or a 4-B load
// of its word, one per item as the 1-B load.
// Or data only, decoded as the kernels do (e4m3 -> f16x2 -> 2 f32, times the scale, -> bf16x2) and stored
// as two 16-B chunks (kDecode), to see what the decode adds to the gather.
// kDecodeF16: what an f16 tile would cost instead (e4m3x2 -> f16x2, one f16x2 multiply by the scale per 2
// dims, no f32 round trip); not exact for every scale spread, measured only to size that lever.
enum LoadMode { kNc = 0, kNcDataOnly = 1, kNcNoAlloc = 2, kPlain = 3, kCpAsync = 4, kBulk = 5, kScaleRow16 = 6, kScaleWord4 = 7,
                kDecode = 8, kDecodeF16 = 9, kStore2 = 10, kPipelined = 11, kCpAsyncThenDecode = 12 };
// kPipelined (<= 64 records): warps 0-7 load the raw data rows by cp.async into a staging area in batches of 8
// records, each batch completing on its own mbarrier (cp.async.mbarrier.arrive.noinc), while warps 8-15
// decode (the kernels' exact decode, a fixed scale) and store each batch as soon as it lands: does the decode
// then run under the loads instead of after them? kCpAsyncThenDecode: the same loads by all threads, then
// the decode by all threads after a CTA barrier (the same work without the overlap).
constexpr int kPipeBatch = 8, kPipeBatches = 64 / kPipeBatch;
// The decoded piece's two 16-B chunks into its 1-KB row (rows wrap in the 64-KB area: timing only). The
// chunk pair of lane l goes to chunks 2l and 2l+1, XOR 1 for lanes 4..7 of each quarter, so each store
// instruction's quarter-warp covers 8 distinct 16-B positions of a 128-B line (no bank conflicts, as the
// kernels' swizzled tile; the first version of this probe stored at a 32-B lane stride, 2-way conflicts).
__device__ __forceinline__ void store_bf16_piece(unsigned char* kv, int it, uint4 lo, uint4 hi) {
  const int l = it & 31, flip = (l >> 2) & 1;
  unsigned char* row = kv + ((it >> 5) * 1024) % (kMaxRec * kData);
  *reinterpret_cast<uint4*>(row + ((2 * l) ^ flip) * 16) = lo;
  *reinterpret_cast<uint4*>(row + ((2 * l + 1) ^ flip) * 16) = hi;
}
__device__ __forceinline__ unsigned e4m3x2_f16x2_scaled(unsigned short codes, unsigned scale2) {
  unsigned h2, r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(codes));
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h2), "r"(scale2));
  return r;
}
// 16 e4m3 codes times `mult` -> 16 bf16, stored as the piece's two 16-B chunks (the kernels' exact decode).
__device__ __forceinline__ void decode_store_piece(unsigned char* kv, int it, uint4 v, float mult) {
  uint4 lo, hi;
  e4m3x4_scaled(v.x, mult, lo.x, lo.y);
  e4m3x4_scaled(v.y, mult, lo.z, lo.w);
  e4m3x4_scaled(v.z, mult, hi.x, hi.y);
  e4m3x4_scaled(v.w, mult, hi.z, hi.w);
  store_bf16_piece(kv, it, lo, hi);
}

__device__ __forceinline__ uint4 ld_nc_16(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 ld_na_16(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 ld_plain_16(const void* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_plain_u8(const void* p) {
  unsigned short r;
  asm volatile("ld.global.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_nc_u8(const void* p) {
  unsigned short r;
  asm volatile("ld.global.nc.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned cluster_size() {
  unsigned n;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
