// gpc_gather_probe.cu: what bounds the decode kernels' gather (docs/perf-notes.md, session 8).
// Built and run on the device by scripts/device_probe.sh (nvcc -arch=sm_90a; not part of the library).
//
// Each CTA mimics the swap-AB gather: slot ids from global, then per item (record, 16-B piece) a 16-B
// ld.global.nc of the fp8 data and a 1-B ld.global.nc of its scale (v41_fp8 pages: 64 x 512 B data, then
// 64 x 16 B scales), stored to smem; optionally Q (one token's live heads) by every CTA's own loads or by a
// bulk copy multicast to the cluster. A configuration changes one thing: the cluster shape, the load
// instruction (hints, widths, cp.async, TMA), the scale's load, the decode after the loads (the kernels'
// exact one, an f16 one, none), or a pipelined gather (helpers and the mode list: gather_probe_helpers.cuh).
// It reports, per configuration, the median over launches of the grid's span (last CTA's end - first CTA's
// start, %globaltimer), of a CTA's own span, and when thread 0's ids and loads were done.
// First question (refuted, session 8): the cluster's loads, Q's per-CTA copies included, share one GPC's
// port to the L2. Answer: one CTA alone takes as long as a cluster of 10; the number of load instructions
// and the decode after them set the time.
#include <cuda.h>
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>

#include "probe_common.cuh"

#include "gather_probe_helpers.cuh"

constexpr int kOut = 5;  // out[cta] = {start, ids stored, thread 0's loads issued, end, smid}
template <int Mode>
__global__ void __launch_bounds__(kThreads, 1)
    gather_probe(const int* slots, const unsigned char* cache, const unsigned char* q, int n_rec, int q_bytes,
                 int q_mode, unsigned long long* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* kv = smem;                              // [kMaxRec][512]
  unsigned char* qs = smem + kMaxRec * kData;            // [q_bytes]
  int* sid = reinterpret_cast<int*>(qs + 32768);         // [kMaxRec]
  __shared__ alignas(8) uint64_t bar, rec_bar, pipe_bar[kPipeBatches];
  const unsigned long long t0 = gtimer();
  const int tid = threadIdx.x;
  const unsigned rank = cluster_rank(), csize = cluster_size();
  if (q_mode == kQMulticast) {
    if (tid == 0) {
      cuda::ptx::mbarrier_init(&bar, 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
    __syncthreads();
    cluster_arrive_relaxed();  // every peer's barrier is initialised before any multicast lands
  }
  if (tid < n_rec) sid[tid] = slots[blockIdx.x * kMaxRec + tid];
  uint4 qv[4];
  const int q_items = q_mode == kQPerCta ? q_bytes / 16 / kThreads : 0;  // <= 4
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < q_items) qv[i] = ld_nc_16(q + 16 * (tid + i * kThreads));
  if (q_mode == kQMulticast) {
    cluster_wait();
    if (tid == 0) {
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &bar, q_bytes);
      const int part = (q_bytes / csize + 15) & ~15;  // bulk copies move multiples of 16 B
      const int mine = min(part, q_bytes - static_cast<int>(rank) * part);
      if (mine > 0)
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, qs + rank * part,
                                 q + rank * part, mine, &bar, static_cast<uint16_t>((1u << csize) - 1));
    }
  }
  if (Mode == kBulk && tid == 0) cuda::ptx::mbarrier_init(&rec_bar, 1);
  if (Mode == kPipelined && tid < kPipeBatches) cuda::ptx::mbarrier_init(&pipe_bar[tid], kThreads / 2);
  __syncthreads();
  const unsigned long long t_ids = gtimer();
  unsigned long long t_iss = 0;
  // The records: item = (record j, 16-B piece), 32 pieces a record.
  const int items = n_rec * 32;
  if constexpr (Mode == kPipelined || Mode == kCpAsyncThenDecode) {
    // Raw rows staged in the Q area (32 KB: 64 records x 512 B); the bf16 rows go to kv as in kDecode.
    const bool loader = Mode == kCpAsyncThenDecode || tid < kThreads / 2;
    const int loaders = Mode == kCpAsyncThenDecode ? kThreads : kThreads / 2;
    if (loader) {
      for (int b = 0; b < kPipeBatches && b * kPipeBatch < n_rec; ++b) {
        for (int it = b * kPipeBatch * 32 + tid; it < min(n_rec, (b + 1) * kPipeBatch) * 32; it += loaders) {
          const int slot = sid[it >> 5], piece = it & 31;
          const unsigned char* pg = cache + static_cast<int64_t>(slot / kPage) * (kPage * (kData + kScale));
          const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(qs + it * 16));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                       "l"(pg + (slot % kPage) * kData + piece * 16)
                       : "memory");
        }
        if constexpr (Mode == kPipelined) {
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                           static_cast<unsigned>(__cvta_generic_to_shared(&pipe_bar[b])))
                       : "memory");
        }
      }
      t_iss = gtimer();
    }
    if constexpr (Mode == kCpAsyncThenDecode) {
      asm volatile("cp.async.wait_all;" ::: "memory");
      __syncthreads();
    }
    if (Mode == kCpAsyncThenDecode || !loader) {
      const int decoders = Mode == kCpAsyncThenDecode ? kThreads : kThreads / 2;
      const int me = Mode == kCpAsyncThenDecode ? tid : tid - kThreads / 2;
      const float mult = 0x1p-7f;
      for (int b = 0; b < kPipeBatches && b * kPipeBatch < n_rec; ++b) {
        if constexpr (Mode == kPipelined) {
          while (!cuda::ptx::mbarrier_try_wait_parity(&pipe_bar[b], 0)) {
          }
        }
        for (int it = b * kPipeBatch * 32 + me; it < min(n_rec, (b + 1) * kPipeBatch) * 32; it += decoders) {
          decode_store_piece(kv, it, *reinterpret_cast<const uint4*>(qs + it * 16), mult);
        }
      }
    }
  } else if constexpr (Mode == kBulk) {
    if (tid == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &rec_bar, n_rec * (kData + kScale));
    __syncthreads();
    if (tid < n_rec) {
      const int slot = sid[tid];
      const unsigned char* pg = cache + static_cast<int64_t>(slot / kPage) * (kPage * (kData + kScale));
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, kv + tid * kData,
                               pg + (slot % kPage) * kData, kData, &rec_bar);
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, qs + 16384 + tid * kScale,
                               pg + kPage * kData + (slot % kPage) * kScale, kScale, &rec_bar);
    }
    t_iss = gtimer();
    while (!cuda::ptx::mbarrier_try_wait_parity(&rec_bar, 0)) {
    }
  } else if constexpr (Mode == kCpAsync) {
    for (int it = tid; it < items; it += kThreads) {
      const int slot = sid[it >> 5], piece = it & 31;
      const unsigned char* pg = cache + static_cast<int64_t>(slot / kPage) * (kPage * (kData + kScale));
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(kv + (it >> 5) * kData + piece * 16));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(pg + (slot % kPage) * kData + piece * 16)
                   : "memory");
      if ((piece & 7) == 0) {  // the record's scale words: 4 x 4 B
        const unsigned sdst = static_cast<unsigned>(__cvta_generic_to_shared(qs + 16384 + (it >> 5) * kScale + piece / 2));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sdst),
                     "l"(pg + kPage * kData + (slot % kPage) * kScale + piece / 2)
                     : "memory");
      }
    }
    t_iss = gtimer();
    asm volatile("cp.async.wait_all;" ::: "memory");
  } else
  for (int base = 0; base < items; base += 8 * kThreads) {
    uint4 raw[8];
    unsigned sc[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int it = base + tid + k * kThreads;
      if (it < items) {
        const int slot = sid[it >> 5], piece = it & 31;
        const unsigned char* pg = cache + static_cast<int64_t>(slot / kPage) * (kPage * (kData + kScale));
        const unsigned char* d = pg + (slot % kPage) * kData + piece * 16;
        const unsigned char* sp = pg + kPage * kData + (slot % kPage) * kScale + piece / 2;
        if constexpr (Mode == kPlain) {
          raw[k] = ld_plain_16(d);
          sc[k] = ld_plain_u8(sp);
        } else if constexpr (Mode == kScaleRow16) {
          raw[k] = ld_nc_16(d);
          const uint4 row = ld_nc_16(pg + kPage * kData + (slot % kPage) * kScale);
          const unsigned w = (piece / 8) == 0 ? row.x : (piece / 8) == 1 ? row.y : (piece / 8) == 2 ? row.z : row.w;
          sc[k] = (w >> (8 * ((piece / 2) & 3))) & 0xFF;
        } else if constexpr (Mode == kScaleWord4) {
          raw[k] = ld_nc_16(d);
          unsigned w;
          asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(w) : "l"(pg + kPage * kData + (slot % kPage) * kScale + (piece / 8) * 4));
          sc[k] = (w >> (8 * ((piece / 2) & 3))) & 0xFF;
        } else {
          raw[k] = Mode == kNcNoAlloc ? ld_na_16(d) : ld_nc_16(d);
          sc[k] = Mode == kNcDataOnly || Mode == kDecode || Mode == kDecodeF16 || Mode == kStore2 ? 0u : ld_nc_u8(sp);
        }
      }
    }
    if (base == 0) t_iss = gtimer();
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int it = base + tid + k * kThreads;
      if (it < items) {
        uint4 v = raw[k];
        if constexpr (Mode == kStore2) {  // no decode, the same two 16-B stores as a decoded piece
          store_bf16_piece(kv, it, v, v);
        } else if constexpr (Mode == kDecodeF16) {
          const unsigned scale2 = 0x3C003C00u + (sc[k] << 10) * 0x10001u;  // 2^s as f16x2, s small
          uint4 lo, hi;
          lo.x = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.x), scale2);
          lo.y = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.x >> 16), scale2);
          lo.z = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.y), scale2);
          lo.w = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.y >> 16), scale2);
          hi.x = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.z), scale2);
          hi.y = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.z >> 16), scale2);
          hi.z = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.w), scale2);
          hi.w = e4m3x2_f16x2_scaled(static_cast<unsigned short>(v.w >> 16), scale2);
          store_bf16_piece(kv, it, lo, hi);
        } else if constexpr (Mode == kDecode) {
          decode_store_piece(kv, it, v, __uint_as_float((sc[k] + 120u) << 23));
        } else {
          v.x ^= sc[k];
          *reinterpret_cast<uint4*>(kv + (it >> 5) * kData + (it & 31) * 16) = v;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < q_items) *reinterpret_cast<uint4*>(qs + 16 * (tid + i * kThreads)) = qv[i];
  if (q_mode == kQMulticast) {
    while (!cuda::ptx::mbarrier_try_wait_parity(&bar, 0)) {
    }
  }
  __syncthreads();
  const unsigned long long t1 = gtimer();
  if (tid == 0) {
    unsigned long long* o = out + kOut * blockIdx.x;
    o[0] = t0;
    o[1] = t_ids;
    o[2] = t_iss;
    o[3] = t1;
    o[4] = sm_id();
  }
  if (csize > 1) {  // no CTA leaves while a multicast may still target it (and as the kernels' exit rule)
    cluster_arrive_relaxed();
    cluster_wait();
  }
}

struct Config {
  const char* name;
  int ctas, cluster, n_rec, q_bytes, q_mode, load_mode;
};
using Kernel = void (*)(const int*, const unsigned char*, const unsigned char*, int, int, int, unsigned long long*);
constexpr Kernel kKernels[] = {gather_probe<0>, gather_probe<1>, gather_probe<2>, gather_probe<3>, gather_probe<4>,
                               gather_probe<5>, gather_probe<6>, gather_probe<7>, gather_probe<8>, gather_probe<9>, gather_probe<10>, gather_probe<11>, gather_probe<12>};

int main() {
  const Config configs[] = {
      {"T=1 h16 shape: 1 cluster of 10, 64 rec, Q per CTA", 10, 10, 64, 16384, kQPerCta, kNc},
      {"  same, no Q", 10, 10, 64, 0, kQNone, kNc},
      {"  same, Q by one TMA multicast to the cluster", 10, 10, 64, 16384, kQMulticast, kNc},
      {"  same loads, 10 CTAs not clustered (spread)", 10, 1, 64, 16384, kQPerCta, kNc},
      {"one CTA, 64 rec, no Q: ld.global.nc v4 + u8 scale", 1, 1, 64, 0, kQNone, kNc},
      {"  data only (no scale loads)", 1, 1, 64, 0, kQNone, kNcDataOnly},
      {"  L1::no_allocate", 1, 1, 64, 0, kQNone, kNcNoAlloc},
      {"  plain ld.global", 1, 1, 64, 0, kQNone, kPlain},
      {"  cp.async (LDGSTS) 16 B + 4-B scale words", 1, 1, 64, 0, kQNone, kCpAsync},
      {"  bulk copies, one pair a record", 1, 1, 64, 0, kQNone, kBulk},
      {"  the scale by a 16-B row load per item", 1, 1, 64, 0, kQNone, kScaleRow16},
      {"  the scale by a 4-B word load per item", 1, 1, 64, 0, kQNone, kScaleWord4},
      {"  data only + the kernels' e4m3 decode, 2 x 16-B stores", 1, 1, 64, 0, kQNone, kDecode},
      {"  data only + an f16 decode (cvt + f16x2 mul), 2 x 16-B stores", 1, 1, 64, 0, kQNone, kDecodeF16},
      {"  data only, no decode, 2 x 16-B stores", 1, 1, 64, 0, kQNone, kStore2},
      {"  cp.async all, then the exact decode from smem", 1, 1, 64, 0, kQNone, kCpAsyncThenDecode},
      {"  pipelined: 8 warps cp.async in batches, 8 warps decode", 1, 1, 64, 0, kQNone, kPipelined},
      {"T=1 shape (cluster of 10, 64 rec), pipelined", 10, 10, 64, 0, kQNone, kPipelined},
      {"one CTA, 16 rec, nc", 1, 1, 16, 0, kQNone, kNc},
      {"one CTA, 32 rec, nc", 1, 1, 32, 0, kQNone, kNc},
      {"one CTA, 128 rec, nc", 1, 1, 128, 0, kQNone, kNc},
      {"  data only", 1, 1, 128, 0, kQNone, kNcDataOnly},
      {"  data only + decode", 1, 1, 128, 0, kQNone, kDecode},
      {"  data only + f16 decode", 1, 1, 128, 0, kQNone, kDecodeF16},
      {"  data only, 2 x 16-B stores", 1, 1, 128, 0, kQNone, kStore2},
      {"  cp.async", 1, 1, 128, 0, kQNone, kCpAsync},
      {"  bulk", 1, 1, 128, 0, kQNone, kBulk},
      {"T=16 h16 shape: 16 clusters of 6, 107 rec, Q per CTA", 96, 6, 107, 16384, kQPerCta, kNc},
      {"  same, cp.async", 96, 6, 107, 16384, kQPerCta, kCpAsync},
      {"  same, bulk", 96, 6, 107, 16384, kQPerCta, kBulk},
      {"  same, data only", 96, 6, 107, 16384, kQPerCta, kNcDataOnly},
      {"  same, data only + decode", 96, 6, 107, 16384, kQPerCta, kDecode},
      {"  same, data only + f16 decode", 96, 6, 107, 16384, kQPerCta, kDecodeF16},
      {"  same, data only, 2 x 16-B stores", 96, 6, 107, 16384, kQPerCta, kStore2},
      {"  same, scale by 16-B row loads", 96, 6, 107, 16384, kQPerCta, kScaleRow16},
      {"  same, scale by 4-B word loads", 96, 6, 107, 16384, kQPerCta, kScaleWord4},
  };
  std::mt19937_64 rng(7);
  std::vector<unsigned char> h_cache(size_t(kRecords / kPage) * kPage * (kData + kScale));
  for (auto& b : h_cache) b = static_cast<unsigned char>(rng());
  unsigned char *d_cache, *d_q;
  int* d_slots;
  unsigned long long* d_out;
  CHECK(cudaMalloc(&d_cache, h_cache.size()));
  CHECK(cudaMemcpy(d_cache, h_cache.data(), h_cache.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&d_q, 32768));
  CHECK(cudaMemset(d_q, 1, 32768));
  CHECK(cudaMalloc(&d_slots, 96 * kMaxRec * sizeof(int)));
  CHECK(cudaMalloc(&d_out, 96 * kOut * sizeof(unsigned long long)));
  const int smem = kMaxRec * kData + 32768 + kMaxRec * 4;
  for (Kernel k : kKernels) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  std::printf("%-58s %9s %9s %9s %9s %9s  (ns, median of 200 launches)\n", "configuration", "grid span", "CTA span",
              "CTA max", "ids", "issued");
  for (const Config& c : configs) {
    std::vector<double> grid_span, cta_span, cta_max, ids, issued;
    std::vector<unsigned long long> h_out(size_t(c.ctas) * kOut);
    for (int launch = 0; launch < 210; ++launch) {
      std::vector<int> slots(96 * kMaxRec);
      for (auto& s : slots) s = static_cast<int>(rng() % kRecords);
      CHECK(cudaMemcpy(d_slots, slots.data(), slots.size() * sizeof(int), cudaMemcpyHostToDevice));
      launch_clustered(kKernels[c.load_mode], c.ctas, c.cluster, kThreads, smem, d_slots, d_cache, d_q, c.n_rec,
                       c.q_bytes, c.q_mode, d_out);
      CHECK(cudaDeviceSynchronize());
      if (launch < 10) continue;  // warm-up
      CHECK(cudaMemcpy(h_out.data(), d_out, h_out.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      unsigned long long lo = ~0ull, hi = 0;
      std::vector<double> spans;
      for (int b = 0; b < c.ctas; ++b) {
        const unsigned long long* o = &h_out[size_t(kOut) * b];
        lo = std::min(lo, o[0]);
        hi = std::max(hi, o[3]);
        spans.push_back(double(o[3] - o[0]));
      }
      ids.push_back(double(h_out[1] - h_out[0]));
      issued.push_back(double(h_out[2] - h_out[0]));
      grid_span.push_back(double(hi - lo));
      cta_span.push_back(median(spans));
      cta_max.push_back(*std::max_element(spans.begin(), spans.end()));
    }
    std::printf("%-58s %9.0f %9.0f %9.0f %9.0f %9.0f   smids:", c.name, median(grid_span), median(cta_span),
                median(cta_max), median(ids), median(issued));
    for (int b = 0; b < std::min(c.ctas, 10); ++b) std::printf(" %llu", h_out[size_t(kOut) * b + 4]);
    std::printf("\n");
  }
  return 0;
}
