// wgmma_rate_probe.cu: what limits the rate of small-N wgmma on one H200 SM (docs/perf-notes.md).
// Built and run by scripts/device_probe.sh (nvcc -arch=sm_90a).
//
// Question. Swap-AB's S^T GEMM runs, per warpgroup of a 512-thread CTA (4 warpgroups at once), a chain of 8
// or 16 wgmma m64nNk16 (N = 8/16/32 heads, A and B K-major SW128 in smem) into one accumulator. SM-wide it
// takes ~40 cycles a wgmma at N <= 16 and ~57 at N = 32, 3-4x the tensor cores' rate (N / 2 cycles a wgmma
// SM-wide at 2048 bf16 FMA/clk/SM), and 2 or 4 independent accumulator chains did not help at all; O^T
// (m64n64k16, A MN-major) also takes ~40. We need the cost model of wgmma issue on the H200: a fixed cost per
// wgmma or per operand byte, per warpgroup or per SM, and how it depends on N, the A operand's source and
// layout, the chain.
//
// Method. One CTA (512 threads; 384 for N = 256, whose 128 accumulator registers a thread do not fit at 512)
// with 193 KB of dynamic smem filled with bf16 in [1, 1.25) before the timed region. A = 128 KB laid out as
// the KV tile (256 rows x 4 64-dim blocks, block-major SW128): K-major m tile g = rows 64g.., step kk at
// block kk >> 2, +32 B per kk & 3, LBO 0, SBO 1024; MN-major (TransA = 1, as values_export_wgmma) the same
// bytes are 4 dim blocks x 256 slots: m tile g = dim block g, step kk at +2 KB kk, LBO 32 KB, SBO 1024. B = N
// rows K-major (as Q), warpgroup g 4 steps further (the K parts of Q differ). Steps wrap every 8 (kWrap). W
// warpgroups run (the others only meet the barriers); each one's thread 0 reads %clock64 after the
// __syncthreads that follows the fill, runs fence, S wgmmas (unrolled, no branch), commit, wait_group 0, and
// reads %clock64 again. A 'priv': warpgroup g reads m tile g; 'shrd': all read m tile 0. ch > 1: steps
// alternate over ch independent accumulators. RS: A from 4 registers of bf16 constants. desc U: each
// warpgroup's code has its index as a literal, so the descriptors live in uniform registers (one UIADD a
// step, HGMMAs back to back in the SASS); R: the index is threadIdx.x >> 7 as in the kernels, and each
// wgmma's two descriptors are built in regular registers and moved by 4 R2URs. Best of 5 launches of the max
// over warpgroups; the all-SMs row takes the median CTA of each launch.
//
// Reading the output. total = cycles of the slowest warpgroup; /WG = total / S, one warpgroup's interval
// between wgmmas; /SM = total / (W S), the SM-wide cost to set against the kernels' 40-57; ideal = N / 2
// (tensor-core math); x = /SM / ideal. /SM flat from N = 8 to 64 means a fixed cost a wgmma (issue, or A's 2
// KB of smem: 16 cycles at 128 B/clk), not math; /SM rising with N past that is math or B's bytes (N x 32 B).
// /WG flat in W means a per-warpgroup limit (the dependent chain: the ch rows test it); /SM flat in W a
// shared SM resource. MN vs K: the A layout's cost; RS vs SS: A's smem read; R vs U: the kernels' descriptor
// code. The S = 1 rows are latency; the S = 0 row is the floor they include (clock reads, fence, commit,
// wait; ptxas fills the empty group with one zero-operand m64n8k16).
// Sections 8-9 (session 14; -DWGMMA_PROBE_DATA_ONLY builds them alone): 8, operand values ([1, 1.25) against
// random bf16: no difference, run 5); 9, what is pending before the chain (a global store as a timeline stamp,
// a store by every thread, a load in flight): the kernels' timelines put 400-1000 cycles between the barrier and
// their first wgmma (docs/perf-notes.md, session 14); section 9 says whether that is the stamps' own stores.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_common.cuh"

constexpr int kARows = 256, kABytes = kARows * 128 * 4;  // 256 rows (slots) x 4 64-dim blocks = 128 KB
constexpr int kBBytes = 64 * 1024, kSmem = kABytes + kBBytes + 1024;
constexpr int kMaxThreads = 512, kMaxCtas = 132;
__host__ __device__ constexpr int threads_for(int n) { return n == 256 ? 384 : 512; }
enum Mode { kSSK = 0, kSSMN = 1, kRS = 2 };  // A K-major smem, A MN-major smem, A in registers

// --- wgmma wrappers (kernels_src/wgmma.cuh, copied: probes are standalone) ---
__device__ __forceinline__ unsigned long long sw128_desc(unsigned smem_addr, unsigned lbo_bytes,
                                                         unsigned sbo_bytes) {
  return static_cast<unsigned long long>((smem_addr & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<unsigned long long>((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ long long clk() {
  long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

// Register lists %0 .. %(R-1) of the accumulators and their "+f" operands.
#define L4 "%0,%1,%2,%3"
#define L8 L4 ",%4,%5,%6,%7"
#define L16 L8 ",%8,%9,%10,%11,%12,%13,%14,%15"
#define L32 L16 ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define L64                                                               \
  L32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define L128                                                                         \
  L64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"            \
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"             \
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define F8(i) F4(i), F4(i + 4)
#define F16(i) F8(i), F8(i + 8)
#define F32(i) F16(i), F16(i + 16)
#define F64(i) F32(i), F32(i + 32)
#define F128(i) F64(i), F64(i + 64)
#define WG_HEAD(NN) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.bf16.bf16 {"
// SS: d += A (desc a, TransA) * B (desc b, K-major); operands a, b, TransA follow the R accumulators.
#define WG_SS(NN, LIST, IA, IB, IT, ...)                                            \
  asm volatile(WG_HEAD(NN) LIST "}, %" #IA ", %" #IB ", p, 1, 1, %" #IT ", 0;\n}\n" \
               : __VA_ARGS__                                                        \
               : "l"(a), "l"(b), "n"(TransA))
// RS: d += A (4 registers of bf16x2) * B (desc b, K-major): scale-d, imm-scale-a, imm-scale-b, imm-trans-b.
#define WG_RS(NN, LIST, I0, I1, I2, I3, IB, ...)                                                       \
  asm volatile(WG_HEAD(NN) LIST "}, {%" #I0 ",%" #I1 ",%" #I2 ",%" #I3 "}, %" #IB ", p, 1, 1, 0;\n}\n" \
               : __VA_ARGS__                                                                           \
               : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(b))

template <int N, int TransA>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
  if constexpr (N == 8)
    WG_SS(8, L4, 4, 5, 6, F4(0));
  else if constexpr (N == 16)
    WG_SS(16, L8, 8, 9, 10, F8(0));
  else if constexpr (N == 32)
    WG_SS(32, L16, 16, 17, 18, F16(0));
  else if constexpr (N == 64)
    WG_SS(64, L32, 32, 33, 34, F32(0));
  else if constexpr (N == 128)
    WG_SS(128, L64, 64, 65, 66, F64(0));
  else
    WG_SS(256, L128, 128, 129, 130, F128(0));
}
template <int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const unsigned (&ra)[4], unsigned long long b) {
  if constexpr (N == 8)
    WG_RS(8, L4, 4, 5, 6, 7, 8, F4(0));
  else if constexpr (N == 16)
    WG_RS(16, L8, 8, 9, 10, 11, 12, F8(0));
  else if constexpr (N == 32)
    WG_RS(32, L16, 16, 17, 18, 19, 20, F16(0));
  else if constexpr (N == 64)
    WG_RS(64, L32, 32, 33, 34, 35, 36, F32(0));
  else if constexpr (N == 128)
    WG_RS(128, L64, 64, 65, 66, 67, 68, F64(0));
  else
    WG_RS(256, L128, 128, 129, 130, 131, 132, F128(0));
}

// --- the kernel: one configuration per instantiation ---
// Warpgroup g's chain; returns its cycles. g is a literal when Uni (descriptors then fold to uniform
// registers, UIADD a step), threadIdx.x >> 7 otherwise (as the kernels: descriptors in per-thread registers,
// 4 R2UR a wgmma).
template <int N, int Md, int S, int C, bool AShared, bool Uni, int Pre = 0>
__device__ __forceinline__ long long wg_chain(unsigned base, int g, float* sink) {
  const int mt = AShared ? 0 : g;
  const unsigned a_tile = Md == kSSK ? base + mt * 64 * 128 : base + mt * (kARows * 128);
  const unsigned b_tile = base + kABytes;
  const unsigned ra[4] = {0x3F803F80u, 0x3F813F80u, 0x3F803F82u, 0x3F833F80u};
  float acc[C][N / 2];
#pragma unroll
  for (int c = 0; c < C; ++c) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[c][i] = 0.0f;
    pin(acc[c]);
  }
  // Steps wrap every kWrap k16 steps (2 64-dim blocks): 8 distinct descriptor pairs fit the uniform
  // registers; at 16 ptxas parks some in regular registers and adds R2URs to a chain of 32.
  constexpr int kWrap = 8;
  // Section 9: a global store just before the chain, as the timeline's stamps do (Pre 1: thread 0 of the
  // warpgroup; 2: every thread), to see whether the wgmma fence waits for it.
  if constexpr (Pre == 1) {
    if ((threadIdx.x & 127) == 0) sink[kMaxCtas * kMaxThreads + blockIdx.x * 4 + g] = 1.0f;
  } else if constexpr (Pre == 2) {
    sink[kMaxCtas * kMaxThreads + blockIdx.x * kMaxThreads + threadIdx.x] = 1.0f;
  }
  // Pre 3: a global load in flight (issued before the chain, consumed after it), as Q's loads or the records'
  // would be if a GEMM were moved under them.
  // Pre 8 (session 20): the load in flight and, inside the timed region, `fence.proxy.async`: whether its
  // MEMBAR.ALL.CTA waits for the thread's outstanding loads (session 20's register S^T put the fence after Q's
  // stores with the records in flight, and no thread decoded before its records landed).
  float pending = 0.0f;
  if constexpr (Pre == 3 || Pre == 8) {
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(pending) : "l"(sink + kMaxCtas * kMaxThreads + threadIdx.x));
  }
  const long long t0 = clk();
  // Pre 4 / 5: inside the timed region, `fence.proxy.async` (SASS: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S, as
  // before every barrier that hands generic smem stores to a wgmma) after a global store by thread 0 of the
  // warpgroup (4, a timeline stamp's) or alone (5): whether the MEMBAR waits for the store to land.
  if constexpr (Pre == 4) {
    if ((threadIdx.x & 127) == 0) sink[kMaxCtas * kMaxThreads + blockIdx.x * 4 + g] = 1.0f;
  }
  if constexpr (Pre == 4 || Pre == 5 || Pre == 8) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  wg_fence();
  // Uni: one descriptor a tile, a step adds its byte offset >> 4 (the address field cannot carry: < 256 KB).
  const unsigned long long a0 = sw128_desc(a_tile, Md == kSSMN ? kARows * 128 : 0, 1024);
  const unsigned long long b0 = sw128_desc(b_tile, 0, 1024);
#pragma unroll
  for (int kk = 0; kk < S; ++kk) {
    const int ka = kk % kWrap, kb = (kk + 4 * g) % kWrap;
    const unsigned a_off = Md == kSSK ? (ka >> 2) * (kARows * 128) + (ka & 3) * 32 : ka * 16 * 128;
    const unsigned b_off = (kb >> 2) * (N * 128) + (kb & 3) * 32;
    const unsigned long long ad =
        Uni ? a0 + (a_off >> 4) : sw128_desc(a_tile + a_off, Md == kSSMN ? kARows * 128 : 0, 1024);
    const unsigned long long bd = Uni ? b0 + (b_off >> 4) : sw128_desc(b_tile + b_off, 0, 1024);
    if constexpr (Md == kRS) {
      mma_rs<N>(acc[kk % C], ra, bd);
    } else {
      mma_ss<N, Md == kSSMN>(acc[kk % C], ad, bd);
    }
  }
  wg_commit();
  wg_wait_all();
  const long long t1 = clk();
  float s = pending;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    pin(acc[c]);
    s += acc[c][0];
  }
  sink[blockIdx.x * kMaxThreads + threadIdx.x] = s;  // one accumulator value a thread: the work is live
  return t1 - t0;
}

template <int N, int Md, int W, int S, int C, bool AShared, bool Uni, bool Rnd, int Pre>
__global__ void __launch_bounds__(threads_for(N), 1) rate(float* sink, long long* cycles) {
  static_assert(W * 128 <= threads_for(N) && C >= 1 && (S == 0 || S % C == 0), "configuration");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // nvcc -arch=sm_90a also emits compute_90 PTX, which has no wgmma
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ long long wg_cycles[4];
  const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const unsigned base = (raw + 1023u) & ~1023u;  // 1024-B aligned: A at base, B at base + 128 KB
  unsigned* words = reinterpret_cast<unsigned*>(smem_raw + (base - raw));
  for (int i = threadIdx.x; i < (kABytes + kBBytes) / 4; i += blockDim.x) {
    const unsigned h = (static_cast<unsigned>(i) * 2654435761u) >> 10;  // bf16 pair in [1, 1.25)
    words[i] = (0x3F80u | (h & 0x1Fu)) | ((0x3F80u | ((h >> 5) & 0x1Fu)) << 16);
    if constexpr (Rnd) {  // section 8: full-entropy bf16 (random sign, 7 mantissa bits, exponents 2^-8 .. 2^7)
      unsigned x = static_cast<unsigned>(i) * 2654435761u + 0x9E3779B9u;
      x ^= x >> 15, x *= 0x85EBCA6Bu, x ^= x >> 13, x *= 0xC2B2AE35u, x ^= x >> 16;
      const unsigned lo = (x & 0x807Fu) | ((119u + ((x >> 7) & 15u)) << 7);
      const unsigned hi = ((x >> 16) & 0x807Fu) | ((119u + ((x >> 23) & 15u)) << 7);
      words[i] = lo | (hi << 16);
    }
  }
  // Section 10 (session 15): Pre 6 / 7 rewrite the A region (128 KB) with 16-B stores just before the chain,
  // as the kernels' gather writes its KV tile (bf16 1.0: the values do not matter, section 8): 6 right before
  // the fence and barrier, 7 followed by ~4,000 cycles of waiting, so that no store is still draining.
  // Against Pre 0: whether the first wgmma after a barrier waits for freshly stored operands (the kernels'
  // 400-900 cycles between the gather's barrier and the first S^T wgmma, docs/perf-notes.md session 15).
  if constexpr (Pre == 6 || Pre == 7) {
    __syncthreads();
    for (int i = threadIdx.x; i < kABytes / 16; i += blockDim.x) {
      asm volatile("st.shared.v4.u32 [%0], {%1,%1,%1,%1};" ::"r"(base + 16u * i), "r"(0x3F803F80u)
                   : "memory");
    }
    if constexpr (Pre == 7) {
      const long long w0 = clk();
      while (clk() - w0 < 4000) {
      }
    }
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic stores -> async-proxy (wgmma) reads
  __syncthreads();
  const int g = threadIdx.x >> 7;
  long long t = 0;
  if constexpr (!Uni) {
    if (g < W) t = wg_chain<N, Md, S, C, AShared, Uni, Pre>(base, g, sink);
  } else {
    if (g == 0) t = wg_chain<N, Md, S, C, AShared, Uni, Pre>(base, 0, sink);
    if constexpr (W > 1)
      if (g == 1) t = wg_chain<N, Md, S, C, AShared, Uni, Pre>(base, 1, sink);
    if constexpr (W > 2)
      if (g == 2) t = wg_chain<N, Md, S, C, AShared, Uni, Pre>(base, 2, sink);
    if constexpr (W > 3)
      if (g == 3) t = wg_chain<N, Md, S, C, AShared, Uni, Pre>(base, 3, sink);
  }
  if (g < W && (threadIdx.x & 127) == 0) wg_cycles[g] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long m = 0;
    for (int w = 0; w < W; ++w) m = wg_cycles[w] > m ? wg_cycles[w] : m;
    cycles[blockIdx.x] = m;
  }
#else
  __trap();
#endif
}

// --- host ---
float* g_sink;
long long* g_cycles;

// One table row: best of 5 launches (ctas = 1: the CTA's cycles; ctas > 1: the median CTA's).
template <int N, int Md, int W, int S, int C = 1, bool AShared = false, bool Uni = true, bool Rnd = false,
          int Pre = 0>
void row(int ctas = 1) {
  auto k = rate<N, Md, W, S, C, AShared, Uni, Rnd, Pre>;
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  long long total = 1ll << 60;
  if (ctas == 1) {
    total = best_cycles([&](int) { k<<<1, threads_for(N), kSmem>>>(g_sink, g_cycles); }, g_cycles);
  } else {
    std::vector<long long> c(ctas);
    for (int rep = 0; rep < 5; ++rep) {
      k<<<ctas, threads_for(N), kSmem>>>(g_sink, g_cycles);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(c.data(), g_cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost));
      std::nth_element(c.begin(), c.begin() + ctas / 2, c.end());
      total = std::min(total, c[ctas / 2]);
    }
  }
  static const char* kModes[] = {"SS K/K", "SS MN/K", "RS reg/K"};
  const char* a_src = Md == kRS ? "-" : (AShared ? "shrd" : "priv");
  const double per_wg = S ? double(total) / S : 0.0, per_sm = S ? double(total) / (W * S) : 0.0;
  std::printf("%-8s %-4s %-4s %3d %2d %3d %2d %4d %8lld %7.1f %7.1f %6.1f %5.2f\n", kModes[Md], a_src,
              Uni ? "U" : "R", N, W, S, C, ctas, total, per_wg, per_sm, N / 2.0,
              S ? per_sm / (N / 2.0) : 0.0);
}

// Sections 1 and 2: W x S for one N and A mode.
template <int N, int Md>
void sweep_w_s() {
  constexpr int kW4 = threads_for(N) / 128 >= 4 ? 4 : 3;  // N = 256: 3 warpgroups (384 threads)
  row<N, Md, 1, 8>();
  row<N, Md, 1, 32>();
  row<N, Md, 2, 8>();
  row<N, Md, 2, 32>();
  row<N, Md, kW4, 8>();
  row<N, Md, kW4, 32>();
}

int main() {
  CHECK(cudaMalloc(&g_sink, 2 * kMaxCtas * kMaxThreads * sizeof(float)));  // the second half: section 9's stores
  CHECK(cudaMalloc(&g_cycles, kMaxCtas * sizeof(long long)));
  int clock_khz = 0, sms = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("wgmma m64nNk16 f32 += bf16 * bf16: %d KB dynamic smem, %d SMs, SM clock attribute %d kHz\n",
              kSmem / 1024, sms, clock_khz);
  std::printf("desc U: uniform descriptors (UIADD); R: from threadIdx as the kernels (4 R2UR a wgmma)\n");
  std::printf("ideal = N / 2 cycles a wgmma SM-wide (2048 bf16 FMA/clk/SM); x = /SM / ideal\n");
  std::printf("A/B      A    desc   N  W   S ch ctas    total     /WG     /SM  ideal     x\n");
#ifndef WGMMA_PROBE_DATA_ONLY  // -DWGMMA_PROBE_DATA_ONLY: section 8 alone (a quick build)
  std::printf("-- 1. SS, A and B K-major (N = 256: W = 3 at most, 384 threads)\n");
  sweep_w_s<8, kSSK>();
  sweep_w_s<16, kSSK>();
  sweep_w_s<32, kSSK>();
  row<32, kSSK, 4, 8, 1, true>();
  row<32, kSSK, 4, 32, 1, true>();
  sweep_w_s<64, kSSK>();
  sweep_w_s<128, kSSK>();
  sweep_w_s<256, kSSK>();
  std::printf("-- 2. SS, A MN-major (TransA = 1, as O^T), B K-major\n");
  sweep_w_s<16, kSSMN>();
  sweep_w_s<32, kSSMN>();
  row<32, kSSMN, 4, 32, 1, true>();
  sweep_w_s<64, kSSMN>();
  std::printf("-- 3. independent accumulator chains (steps alternate)\n");
  row<32, kSSK, 4, 32, 2>();
  row<32, kSSK, 4, 32, 4>();
  row<8, kSSK, 4, 32, 4>();
  std::printf(
      "-- 4. RS (A from registers) against SS, S = 16 (ptxas serializes a chain of 32 RS wgmmas: C7511)\n");
  row<16, kSSK, 4, 16>();
  row<16, kRS, 4, 16>();
  row<16, kRS, 1, 16>();
  row<32, kSSK, 4, 16>();
  row<32, kRS, 4, 16>();
  row<32, kRS, 1, 16>();
  row<64, kSSK, 4, 16>();
  row<64, kRS, 4, 16>();
  row<64, kRS, 1, 16>();
  std::printf(
      "-- 5. descriptors computed from threadIdx a step, as the kernels' code (R) against uniform (U)\n");
  row<8, kSSK, 4, 8, 1, false, false>();
  row<8, kSSK, 4, 32, 1, false, false>();
  row<16, kSSK, 4, 8, 1, false, false>();
  row<16, kSSK, 4, 32, 1, false, false>();
  row<32, kSSK, 4, 8, 1, false, false>();
  row<32, kSSK, 4, 32, 1, false, false>();
  row<32, kSSK, 2, 32, 1, false, false>();
  row<64, kSSMN, 4, 32, 1, false, false>();
  std::printf("-- 6. latency: one warpgroup, one wgmma (S = 0: clock reads + fence + commit + wait only)\n");
  row<32, kSSK, 1, 0>();
  row<8, kSSK, 1, 1>();
  row<32, kSSK, 1, 1>();
  row<128, kSSK, 1, 1>();
  row<32, kSSMN, 1, 1>();
  row<32, kRS, 1, 1>();
  std::printf("-- 7. all SMs at once (one CTA an SM, the median CTA) against one CTA\n");
  row<32, kSSK, 4, 32>(std::min(sms, kMaxCtas));
  row<32, kSSK, 4, 32>(1);
#endif
  // Section 8 (session 14): the kernels' S^T took ~1.5-2x the cycles of sections 1 and 5 at the same shape;
  // their operands are full-entropy bf16, the rows above [1, 1.25). Each pair: the fill of sections 1-7, then
  // random bf16 (R descriptors as the kernels; the last pair U, and O^T's MN-major N = 64).
  std::printf("-- 8. operand data: [1, 1.25) (first of each pair) against random bf16 (second)\n");
  row<8, kSSK, 4, 8, 1, false, false, false>();
  row<8, kSSK, 4, 8, 1, false, false, true>();
  row<16, kSSK, 4, 8, 1, false, false, false>();
  row<16, kSSK, 4, 8, 1, false, false, true>();
  row<32, kSSK, 4, 8, 1, false, false, false>();
  row<32, kSSK, 4, 8, 1, false, false, true>();
  row<32, kSSK, 4, 32, 1, false, true, false>();
  row<32, kSSK, 4, 32, 1, false, true, true>();
  row<64, kSSMN, 4, 8, 1, false, false, false>();
  row<64, kSSMN, 4, 8, 1, false, false, true>();
  std::printf("-- 9. just before the chain: nothing / a global store by thread 0 of each warpgroup (as a timeline\n"
              "   stamp) / by every thread / a global load in flight by every thread / (timed) fence.proxy.async alone /\n"
              "   (timed) thread 0's global store then fence.proxy.async / a load in flight then (timed)\n"
              "   fence.proxy.async; then N = 8: none, thread 0's store\n");
  row<32, kSSK, 4, 8, 1, false, false, false, 0>();
  row<32, kSSK, 4, 8, 1, false, false, false, 1>();
  row<32, kSSK, 4, 8, 1, false, false, false, 2>();
  row<32, kSSK, 4, 8, 1, false, false, false, 3>();
  row<32, kSSK, 4, 8, 1, false, false, false, 5>();
  row<32, kSSK, 4, 8, 1, false, false, false, 4>();
  row<32, kSSK, 4, 8, 1, false, false, false, 8>();
  row<8, kSSK, 4, 8, 1, false, false, false, 0>();
  row<8, kSSK, 4, 8, 1, false, false, false, 1>();
  std::printf(
      "-- 10. the A region (128 KB) rewritten with 16-B stores by every thread just before the fence and\n"
      "   barrier: none / right before / then 4,000 cycles of waiting (the chain is timed from the "
      "barrier)\n");
  row<32, kSSK, 4, 8, 1, false, false, false, 0>();
  row<32, kSSK, 4, 8, 1, false, false, false, 6>();
  row<32, kSSK, 4, 8, 1, false, false, false, 7>();
  row<32, kSSK, 4, 32, 1, false, false, false, 0>();
  row<32, kSSK, 4, 32, 1, false, false, false, 6>();
  row<32, kSSK, 4, 32, 1, false, false, false, 7>();
  return 0;
}
