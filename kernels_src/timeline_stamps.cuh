// timeline_stamps.cuh: the development timeline's stamps of both decode kernels (`swapjit timeline`). Empty
// functions unless the source is compiled with -DSWAPJIT_TIMELINE (never a cached key).
// NOTE: device-only; compiled through NVRTC after the prelude; included by decode_common.cuh.
#pragma once

namespace swapjit {
namespace dc {

// Development timeline of both decode kernels (`swapjit timeline`, docs/perf-notes.md): only a source compiled with
// -DSWAPJIT_TIMELINE (never a cached key) has the global below; thread 0 of each CTA then records %clock64
// and %globaltimer at the phase boundaries, [CTA][point][clock, globaltimer]. Otherwise stamp() is empty.
constexpr int kTimelinePoints = 30;
constexpr int kTimelineCtas = 1024;
#ifdef SWAPJIT_TIMELINE
extern "C" {
__device__ unsigned long long swapjit_timeline[kTimelineCtas * kTimelinePoints * 2];
}
#endif
#ifdef SWAPJIT_TIMELINE
// This CTA's record of one point: its SM clock and its globaltimer (ns).
__device__ __forceinline__ void timeline_put(int point, unsigned long long clock, unsigned long long ns) {
  swapjit_timeline[(blockIdx.x * kTimelinePoints + point) * 2] = clock;
  swapjit_timeline[(blockIdx.x * kTimelinePoints + point) * 2 + 1] = ns;
}
#endif
__device__ __forceinline__ void stamp(int point) {
#ifdef SWAPJIT_TIMELINE
  if (threadIdx.x == 0 && blockIdx.x < kTimelineCtas) {
    unsigned long long c, g;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g)::"memory");
    timeline_put(point, c, g);
  }
#else
  (void)point;
#endif
}
// Per-warp points (timeline builds only). A CTA barrier's stamp is thread 0's clock after BAR.SYNC, which
// session 15's clock-only timelines could not tell from the slowest warp's arrival: every warp's lane 0 records
// its clock before the barrier (stamp_warp), and thread 0, after it, stamps the slowest and the fastest warp
// (stamp_warp_spread). Their globaltimer is estimated from thread 0's at kTimelineNominalKhz (the ns column is
// approximate; the cycles column is exact: one SM clock). Thread 0's loop over the warps' clocks delays its
// next stamps by a few hundred cycles (perf-notes session 15): a lean timeline build (SWAPJIT_TIMELINE_LEAN,
// `swapjit timeline --lean`) leaves these points out.
constexpr int kTimelineMaxWarps = 32;
constexpr unsigned long long kTimelineNominalKhz = 1980000;  // the H200's SM clock attribute
#if defined(SWAPJIT_TIMELINE) && !defined(SWAPJIT_TIMELINE_LEAN)
#define SWAPJIT_TIMELINE_WARP_POINTS 1
__shared__ unsigned long long timeline_warp_clock[kTimelineMaxWarps];
#endif
__device__ __forceinline__ void stamp_warp() {
#ifdef SWAPJIT_TIMELINE_WARP_POINTS
  if ((threadIdx.x & 31) == 0) {
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    timeline_warp_clock[threadIdx.x >> 5] = c;
  }
#endif
}
__device__ __forceinline__ void stamp_warp_spread(int slowest, int fastest) {
#ifdef SWAPJIT_TIMELINE_WARP_POINTS
  if (threadIdx.x == 0 && blockIdx.x < kTimelineCtas) {
    unsigned long long c, g, hi = 0, lo = ~0ull;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g)::"memory");
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5) && w < kTimelineMaxWarps; ++w) {
      hi = timeline_warp_clock[w] > hi ? timeline_warp_clock[w] : hi;
      lo = timeline_warp_clock[w] < lo ? timeline_warp_clock[w] : lo;
    }
    timeline_put(slowest, hi, g - (c - hi) * 1000000ull / kTimelineNominalKhz);
    timeline_put(fastest, lo, g - (c - lo) * 1000000ull / kTimelineNominalKhz);
  }
#else
  (void)slowest;
  (void)fastest;
#endif
}

}  // namespace dc
}  // namespace swapjit
