// headpad_decode.cuh: the head-padded sparse decode attention (SPEC.md §3), variant "mma" (mma.sync
// m16n8k16 bf16, any sm_90+). Heads on the MMA's M side, padded to 64 (Q rows of padded heads are zero and
// never written). One thread-block cluster per decode token; cluster rank r works on M tile r / splits and
// on a contiguous share of the token's chunk list (SWA chunks then compressed chunks, 64 slots each, a
// chunk never straddling the two lists). Per chunk: gather + exact dequant to a bf16 tile in smem,
// S = Q K^T, online softmax per head row (log2 domain), O += P_hi V + P_lo V with P split into two bf16
// parts (SPEC §3.2 step 6). NOTE: P rounded to bf16 alone (FlashMLA's choice) moves an output by up to
// ~2^-9 of |V| on peaked rows, which exceeds SPEC §4's 1.1e-3 MXFP8 element bound on the H200 test cases;
// the split costs a second P V MMA per tile and makes P's rounding negligible (~2^-17).
// Then the CTAs of one M tile merge their (m, L, O) partials over DSMEM in fixed rank order, apply the
// sink once, and the shared epilogue (decode_common.cuh) does inverse RoPE and the output write.
// Shapes, layouts and the smem plan: headpad_traits.cuh. Determinism: no atomics, fixed orders only.
#pragma once
#include <cuda/ptx>
#include <cuda/std/limits>

#include "decode_common.cuh"
#include "headpad_traits.cuh"

namespace swapjit {
namespace hp {

constexpr int kH = kKey.live_heads;
constexpr int kSplits = headpad_splits(kKey);
constexpr int kCluster = headpad_cluster(kKey);
constexpr HeadpadSmem kSm = headpad_smem(kKey);
// Merge plan (headpad_traits.cuh): push (bulk copies of slices) with kSplits > 1, pulled tail if any.
constexpr HeadpadMerge kMg = headpad_merge(kKey);
constexpr bool kPush = kMg.push;
constexpr bool kTail = kMg.push_tasks < kMg.tasks;  // some tasks merged by DSMEM loads (64 heads)
constexpr int kLive = kMg.live;                     // live heads of every M tile
constexpr int kMlRowBytes = 2 * kHeadpadMTile * 4;  // one CTA's (m, L): fp32 [2][64]
static_assert(kH == kLive || kH == 2 * kLive, "every M tile has kLive heads");
static_assert(kMg.tasks % 32 == 0 && kMg.slice % 32 == 0 && kMg.tail_slice % 32 == 0 &&
                  kMg.push_tasks % 32 == 0,
              "whole warps take part in a task range or none (write_out_chunk8's quad shuffles)");
static_assert(kMg.tail_slice <= kHeadpadThreads, "one tail task per thread at most");
static_assert(!kPush || (kSm.mlx % 16 == 0 && kSm.recv % 16 == 0 && kSm.bar % 8 == 0 && kMlRowBytes % 16 == 0),
              "bulk copies: 16-B aligned, sizes multiples of 16");
constexpr bool kHasComp = kKey.topk > 0;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -cuda::std::numeric_limits<float>::infinity();
static_assert(headpad_key_supported(kKey), "headpad_decode: unsupported compile key");
static_assert(kVariant == kVariantMma, "headpad_decode has the mma variant only");

// Byte offset of 16-B chunk c of row r in a [rows][512] bf16 tile (1024-B rows). The XOR spreads the same
// chunk of 8 consecutive rows over 8 bank groups, so ldmatrix (8 rows of one chunk) is conflict-free.
__device__ __forceinline__ unsigned tile_off(int r, int c) {
  return static_cast<unsigned>(r * kHeadpadRowBytes + ((c ^ (r & 7)) << 4));
}
// Same for the [64][64] bf16 P tile (128-B rows, 8 chunks).
__device__ __forceinline__ unsigned p_off(int r, int c) {
  return static_cast<unsigned>(r * (kHeadpadChunk * 2) + ((c ^ (r & 7)) << 4));
}
// fp32 [64][512] O export: float pair i of head h. The XOR (bits 2..4 of the pair index) halves the bank
// conflicts of the accumulator-layout stores and keeps the merge's 32-float row reads conflict-free.
__device__ __forceinline__ unsigned oexp_off(int h, int pair) {
  return static_cast<unsigned>(h * (kHeadDim * 4) + ((pair ^ ((h & 7) << 2)) << 3));
}

__device__ __forceinline__ void st_shared_v4(unsigned addr, const uint4& v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// DSMEM (HOPPER_NOTES §5): map a local shared address to CTA `rank` of the cluster, read from it.
__device__ __forceinline__ unsigned map_rank(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// No "memory" clobber: the cluster barrier before the merge orders these reads, and without it the
// compiler may issue all of an item's DSMEM loads back to back (one latency instead of 3 * kSplits).
__device__ __forceinline__ float ld_cluster_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ float4 ld_cluster_v4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Execution-only cluster barrier (no memory ordering; HOPPER_NOTES §5). With no cluster a CTA barrier.
__device__ __forceinline__ void cluster_sync_relaxed() {
  if constexpr (kCluster > 1) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  } else {
    __syncthreads();
  }
}
// Release/acquire cluster barrier: every CTA's smem writes before it are visible to all peers after it.
// With no cluster (one CTA per token) a CTA barrier is the same thing.
__device__ __forceinline__ void cluster_sync() {
  if constexpr (kCluster > 1) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  } else {
    __syncthreads();
  }
}

// One chunk of the token's entry list: entries j0 .. j0+n-1 of the SWA (list 0) or compressed (list 1)
// list, n in 1..64.
struct Chunk {
  int list, j0, n;
};

// Gathers one chunk into kv buffer `kv` (bf16 [64][512], swizzled) and its used-entry flags into
// `valid` (i32 [64]). Warp w takes slots w, w+8, ..; lane l dequantises dims 16l..16l+15 of the slot, so a
// warp reads one record's data row contiguously. Unused entries become zero rows: a zero V row keeps
// P V finite (P is 0 there, and 0 * NaN garbage would not be).
template <int Fmt, int P>
__device__ __forceinline__ void gather_chunk(const CacheView& cache, const i32* slots /* [n] this chunk's ids */,
                                             int n, unsigned kv, int* valid) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The warp's 8 slot ids in one load (lane k < 8 holds slot warp + 8k), handed out by shuffles: the
  // record loads below then wait for one id latency, not one per unrolled group.
  static_assert(kHeadpadChunk / kHeadpadWarps <= 32, "one id per lane");
  const int my_s = warp + kHeadpadWarps * lane;
  const int my_id = lane < kHeadpadChunk / kHeadpadWarps && my_s < n ? slots[my_s] : -1;
  // Groups of kGroup slots: all of a group's record loads are issued before the first decode and store
  // (one load latency per group). The group is bounded so the raw bytes fit beside the 128 O accumulators.
  constexpr int kSlots = kHeadpadChunk / kHeadpadWarps, kGroup = 4;
  static_assert(kSlots % kGroup == 0, "whole groups");
#pragma unroll 1
  for (int k0 = 0; k0 < kSlots; k0 += kGroup) {
    dc::RawPiece16 raw[kGroup];
    int id[kGroup];
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      id[g] = __shfl_sync(0xFFFFFFFFu, my_id, k0 + g);  // -1 past n
      if (id[g] >= 0) raw[g] = dc::load_piece16<Fmt, P>(dc::record_ptrs<Fmt, P>(cache, id[g]), lane);
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const int s = warp + kHeadpadWarps * (k0 + g);
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (id[g] >= 0) dc::decode_piece16<Fmt>(raw[g], lane, lo, hi);
      st_shared_v4(kv + tile_off(s, 2 * lane), lo);
      st_shared_v4(kv + tile_off(s, 2 * lane + 1), hi);
      if (lane == 0) valid[s] = id[g] >= 0 ? 1 : 0;
    }
  }
}

// L2 prefetch of one chunk's records (the 16-B pieces this thread will load in gather_chunk, and the
// scale rows): issued a whole chunk of MMA work ahead of the gather, which then hits L2. Hints only: they
// change no result. The warp's 8 slot ids come in one load and shuffles, as in gather_chunk: loaded one by
// one, each prefetch waited for its id (SASS: LDG, CCTL.E.PF2, LDG, ...), 8 load latencies in a row.
template <int Fmt, int P>
__device__ __forceinline__ void prefetch_chunk(const CacheView& cache, const i32* slots /* [n] */, int n) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kSlots = kHeadpadChunk / kHeadpadWarps;
  const int my_s = warp + kHeadpadWarps * lane;
  const int my_id = lane < kSlots && my_s < n ? slots[my_s] : -1;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int id = __shfl_sync(0xFFFFFFFFu, my_id, k);
    if (id < 0) continue;
    const dc::RecordPtrs<Fmt, P> r = dc::record_ptrs<Fmt, P>(cache, id);
    // One prefetch per 128-B line of the data row (D <= 576 B: at most 5 lines), one for the scale row.
    const u8* a = lane * 128 < record_data_bytes(Fmt) ? r.data + lane * 128 : r.scale;
    if (lane * 128 < record_data_bytes(Fmt) + 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}

__device__ __forceinline__ void prefetch(const DecodeParams& p, int t, const Chunk& c) {
  if (c.list == 0) {
    prefetch_chunk<kKey.swa_format, kKey.swa_page>(p.swa_cache, p.swa_slots + static_cast<i64>(t) * p.swa_width + c.j0,
                                                   c.n);
  } else if constexpr (kHasComp) {
    prefetch_chunk<kKey.comp_format, kKey.comp_page>(p.comp_cache,
                                                     p.comp_slots + static_cast<i64>(t) * p.comp_width + c.j0, c.n);
  }
}

__device__ __forceinline__ void gather(const DecodeParams& p, int t, const Chunk& c, unsigned kv, int* valid) {
  if (c.list == 0) {
    gather_chunk<kKey.swa_format, kKey.swa_page>(p.swa_cache, p.swa_slots + static_cast<i64>(t) * p.swa_width + c.j0,
                                                 c.n, kv, valid);
  } else if constexpr (kHasComp) {
    gather_chunk<kKey.comp_format, kKey.comp_page>(
        p.comp_cache, p.comp_slots + static_cast<i64>(t) * p.comp_width + c.j0, c.n, kv, valid);
  }
}

// Chunk `c` of the token's list: SWA chunks 0 .. swa_chunks-1, then compressed chunks.
__device__ __forceinline__ Chunk chunk_at(int c, int swa_chunks, int swa_len, int comp_len) {
  if (c < swa_chunks) return Chunk{0, c * kHeadpadChunk, min(kHeadpadChunk, swa_len - c * kHeadpadChunk)};
  const int j0 = (c - swa_chunks) * kHeadpadChunk;
  return Chunk{1, j0, min(kHeadpadChunk, comp_len - j0)};
}

// One merge task (head hl of M tile mt, 8-dim chunk c8) from the kSplits partials `ov` (rank order) and
// every split's (m, L) rows in `mlx` ([kSplits][2][64], local smem): w_q = 2^(m_q - M) (0 for an empty
// part), den = sum_q w_q L_q + the sink once (not scaled by sm_scale; 0 when every part is empty: zero
// output), the sum in fixed rank order (SPEC §3.3), one division, then inverse RoPE and the output.
// The same operations in the same order as the pull merge below (weights via smem there): same bits.
__device__ __forceinline__ void merge_task(const DecodeParams& p, int t, int mt, int hl, int c8,
                                           const float4 (&ov)[kSplits][2], const float* mlx, const float* cs) {
  float mq[kSplits], lq[kSplits];
#pragma unroll
  for (int q = 0; q < kSplits; ++q) {
    mq[q] = mlx[q * 2 * kHeadpadMTile + hl];
    lq[q] = mlx[q * 2 * kHeadpadMTile + kHeadpadMTile + hl];
  }
  float big_m = kNegInf;
#pragma unroll
  for (int q = 0; q < kSplits; ++q) big_m = fmaxf(big_m, mq[q]);
  float w[kSplits];
  float d = 0.0f;
#pragma unroll
  for (int q = 0; q < kSplits; ++q) {
    w[q] = big_m == kNegInf || mq[q] == kNegInf ? 0.0f : exp2f(mq[q] - big_m);
    d += w[q] * lq[q];
  }
  if (big_m != kNegInf) {
    const float sink_l2 = p.sink != nullptr ? p.sink[kHeadpadMTile * mt + hl] * kLog2e : kNegInf;
    d += exp2f(sink_l2 - big_m);
  }
  float o[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
  for (int q = 0; q < kSplits; ++q) {
    if (w[q] != 0.0f) dc::add_weighted_chunk8(o, w[q], ov[q]);
  }
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i] *= inv;
  dc::write_out_chunk8(p, t, kHeadpadMTile * mt + hl, c8, o, cs);
}

}  // namespace hp

__global__ void __launch_bounds__(kHeadpadThreads, 1) headpad_decode_kernel(const __grid_constant__ DecodeParams p) {
  using namespace hp;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int hg = warp % 4;  // heads 16*hg .. 16*hg+15 of the M tile
  const int dh = warp / 4;  // S: slots 32*dh..; O: dims 256*dh..
  const int t = blockIdx.x / kCluster;
  const unsigned rank = cluster_rank();
  const int mt = static_cast<int>(rank) / kSplits;     // M tile: heads 64*mt .. 64*mt+63
  const int split = static_cast<int>(rank) % kSplits;  // share of the entry list
  const unsigned sbase = dc::smem_addr(smem);
  float* red = reinterpret_cast<float*>(smem + kSm.red);  // [2][64]
  // [2][64]: m (log2 domain), L. Push merge: this split's row of the (m, L) rows every peer receives.
  float* ml = reinterpret_cast<float*>(smem + (kPush ? kSm.mlx + split * kMlRowBytes : kSm.ml));
  int* valid = reinterpret_cast<int*>(smem + kSm.valid);  // [2][64]

  // The push merge's receive barrier: one local arrival (with the expected bytes) plus the copies' bytes.
  // Initialised before any peer can target it: the publishing cluster barrier orders the two.
  cuda::std::uint64_t* recv_bar = reinterpret_cast<cuda::std::uint64_t*>(smem + kSm.bar);
  if constexpr (kPush) {
    if (tid == 0) {
      cuda::ptx::mbarrier_init(recv_bar, 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
  }

  // Everything below reads inputs that the previous kernel may write (Q, lists, the KV row just inserted).
  dc::stamp(0);
  dc::grid_dependency_wait();
  dc::stamp(1);

  // This CTA's chunk range: the token's chunk list split evenly over kSplits CTAs.
  const int swa_len = max(0, min(p.swa_lens[t], p.swa_width));
  int comp_len = 0;
  if constexpr (kHasComp) {
    if (p.comp_slots != nullptr && p.comp_lens != nullptr) comp_len = max(0, min(p.comp_lens[t], p.comp_width));
  }
  const int swa_chunks = (swa_len + kHeadpadChunk - 1) / kHeadpadChunk;
  const int total_chunks = swa_chunks + (comp_len + kHeadpadChunk - 1) / kHeadpadChunk;
  const int per_cta = (total_chunks + kSplits - 1) / kSplits;
  const int c_begin = min(total_chunks, split * per_cta);
  const int c_end = min(total_chunks, c_begin + per_cta);

  // Q of this M tile (SPEC §3.2 steps 1-2), padded heads as zero rows. 64 heads x 64 chunks of 8 dims.
  {
    const float* cs = dc::cos_sin_row(p, t);
    // All of a thread's Q loads first, then RoPE and the stores: one load latency, not one per chunk.
    // (The loop used to start at tid, so it was not unrolled, and each load waited for the previous
    // chunk's store: 8-16 load latencies in a row, the largest share of ncu's first phase.)
    constexpr int kQItems = kHeadpadMTile * 64 / kHeadpadThreads;  // 16 chunks of 8 dims per thread
    uint4 qv[kQItems];
#pragma unroll
    for (int k = 0; k < kQItems; ++k) {
      const int i = tid + k * kHeadpadThreads;
      const int h = kHeadpadMTile * mt + i / 64;
      qv[k] = h < kH ? dc::q_load_chunk8(p, t, h, i % 64) : make_uint4(0, 0, 0, 0);  // padded heads: zero
    }
    static_assert(kHeadpadThreads % 64 == 0, "a thread's Q chunks share c8 = tid % 64");
    const dc::RopeCoefs rope = dc::rope_coefs(tid % 64, cs);
#pragma unroll
    for (int k = 0; k < kQItems; ++k) {
      const int i = tid + k * kHeadpadThreads;
      st_shared_v4(sbase + kSm.q + tile_off(i / 64, i % 64), dc::q_rope_chunk8(qv[k], i % 64, rope));
    }
  }
  if (c_begin < c_end) gather(p, t, chunk_at(c_begin, swa_chunks, swa_len, comp_len), sbase + kSm.kv, valid);
  __syncthreads();
  dc::stamp(2);

  // Online-softmax state of this thread's two head rows r0 = lane/4 and r1 = r0 + 8 of the warp's 16.
  float o[32][4];  // O[16 heads][256 dims] of the warp: n-tile nt = dims 256*dh + 8*nt .., m16n8 layout
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_run[2] = {kNegInf, kNegInf};  // running max of z * log2(e), shared by the two dh warps
  float l_part[2] = {0.0f, 0.0f};       // this thread's share of the running sum over its slot half
  const float zscale = p.sm_scale * kLog2e;
  const int row0 = 16 * hg + lane / 4;  // M-tile row of accumulator elements 0,1 (2,3: row0 + 8)

  for (int c = c_begin; c < c_end; ++c) {
    const int buf = (c - c_begin) & 1;
    const unsigned kv = sbase + kSm.kv + buf * (kHeadpadChunk * kHeadpadRowBytes);
    // Records of the next chunk start moving to L2 now; gather() after P V below then mostly hits L2.
    if (c + 1 < c_end) prefetch(p, t, chunk_at(c + 1, swa_chunks, swa_len, comp_len));

    // S[16 heads][32 slots] = Q K^T over 512 dims: 32 k-steps x 4 n-tiles.
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      unsigned a[4];
      dc::ldmatrix_x4(sbase + kSm.q + tile_off(16 * hg + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)), a);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        unsigned b[4];  // n-tile 2np: b[0], b[1]; n-tile 2np+1: b[2], b[3]
        dc::ldmatrix_x4(kv + tile_off(32 * dh + 16 * np + (lane >> 4) * 8 + (lane & 7), 2 * kk + ((lane >> 3) & 1)), b);
        dc::mma_bf16_16816(s[2 * np], a, b[0], b[1]);
        dc::mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    // Scores in the log2 domain; unused entries -inf. Row max over this warp's 32 slots, then over both.
    const int* vflag = valid + buf * kHeadpadChunk;
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int slot = 32 * dh + 8 * nt + 2 * (lane % 4) + (e & 1);
        s[nt][e] = vflag[slot] ? s[nt][e] * zscale : kNegInf;
        mx[e / 2] = fmaxf(mx[e / 2], s[nt][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xFFFFFFFFu, mx[r], 2));
      if (lane % 4 == 0) red[dh * kHeadpadMTile + row0 + 8 * r] = mx[r];
    }
    __syncthreads();

    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m_run[r], fmaxf(red[row0 + 8 * r], red[kHeadpadMTile + row0 + 8 * r]));
      const float m_use = m_new == kNegInf ? 0.0f : m_new;  // no used entry yet: keep everything 0, not NaN
      alpha[r] = exp2f(m_run[r] - m_use);
      m_run[r] = m_new;
      l_part[r] *= alpha[r];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - m_use);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - m_use);
        l_part[r] += s[nt][2 * r] + s[nt][2 * r + 1];
      }
    }
    // P to smem as hi = bf16(p) and lo = bf16(p - hi) (SPEC §3.2 step 6): this warp's 16 rows x 32 slots.
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int chunk = 4 * dh + nt, byte = 4 * (lane % 4);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = s[nt][2 * r], p1 = s[nt][2 * r + 1];
        const unsigned hi = fp::pack_bf16x2_rn(p0, p1);
        const float h0 = fp::bf16_to_float(static_cast<unsigned short>(hi & 0xFFFFu));
        const float h1 = fp::bf16_to_float(static_cast<unsigned short>(hi >> 16));
        const unsigned lo = fp::pack_bf16x2_rn(p0 - h0, p1 - h1);  // exact differences
        const unsigned off = p_off(row0 + 8 * r, chunk) + byte;
        *reinterpret_cast<unsigned*>(smem + kSm.p + off) = hi;
        *reinterpret_cast<unsigned*>(smem + kSm.p_lo + off) = lo;
      }
    }
    __syncthreads();

    // O = alpha O + P V: 4 k-steps of 16 slots x 32 n-tiles of 8 dims.
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      o[i][0] *= alpha[0]; o[i][1] *= alpha[0];
      o[i][2] *= alpha[1]; o[i][3] *= alpha[1];
    }
#pragma unroll 1
    for (int ks = 0; ks < kHeadpadChunk / 16; ++ks) {
      unsigned a_hi[4], a_lo[4];
      const unsigned pa = p_off(16 * hg + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4));
      dc::ldmatrix_x4(sbase + kSm.p + pa, a_hi);
      dc::ldmatrix_x4(sbase + kSm.p_lo + pa, a_lo);
#pragma unroll
      for (int np = 0; np < 16; ++np) {
        unsigned b[4];  // .trans: rows are slots (k), 16-B chunks are dims (n)
        dc::ldmatrix_x4_trans(kv + tile_off(16 * ks + ((lane >> 3) & 1) * 8 + (lane & 7), 32 * dh + 2 * np + (lane >> 4)), b);
        dc::mma_bf16_16816(o[2 * np], a_hi, b[0], b[1]);
        dc::mma_bf16_16816(o[2 * np + 1], a_hi, b[2], b[3]);
        dc::mma_bf16_16816(o[2 * np], a_lo, b[0], b[1]);
        dc::mma_bf16_16816(o[2 * np + 1], a_lo, b[2], b[3]);
      }
    }
    // The next chunk into the other buffer: its last reader (P V of c - 1) finished before the barrier
    // that closed the previous iteration; this warp's own P V above reads only kv[buf].
    if (c + 1 < c_end)
      gather(p, t, chunk_at(c + 1, swa_chunks, swa_len, comp_len),
             sbase + kSm.kv + (buf ^ 1) * (kHeadpadChunk * kHeadpadRowBytes), valid + (buf ^ 1) * kHeadpadChunk);
    __syncthreads();  // kv[buf ^ 1] complete; kv[buf], P and red free for the next iteration
  }

  dc::stamp(3);
  // Export (m, L, O) of this CTA. L: quad sum, then the two slot halves in fixed order. O: live rows only
  // (the push merge's receive area lies behind them).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_part[r] += __shfl_xor_sync(0xFFFFFFFFu, l_part[r], 1);
    l_part[r] += __shfl_xor_sync(0xFFFFFFFFu, l_part[r], 2);
    if (lane % 4 == 0) {
      red[dh * kHeadpadMTile + row0 + 8 * r] = l_part[r];
      if (dh == 0) ml[row0 + 8 * r] = m_run[r];
    }
  }
#pragma unroll
  for (int nt = 0; nt < 32; ++nt) {
    const int pair = (256 * dh + 8 * nt) / 2 + lane % 4;
    if (row0 < kLive)
      *reinterpret_cast<float2*>(smem + kSm.oexp + oexp_off(row0, pair)) = make_float2(o[nt][0], o[nt][1]);
    if (row0 + 8 < kLive)
      *reinterpret_cast<float2*>(smem + kSm.oexp + oexp_off(row0 + 8, pair)) = make_float2(o[nt][2], o[nt][3]);
  }
  __syncthreads();
  if (tid < kHeadpadMTile) ml[kHeadpadMTile + tid] = red[tid] + red[kHeadpadMTile + tid];
  dc::launch_dependents();
  if constexpr (kPush) {
    // The bulk copies below read the export and this CTA's (m, L) through the async proxy, and the peers'
    // copies overwrite this CTA's dead KV / Q / P tiles: every thread orders its generic smem accesses
    // before them (HOPPER_NOTES §1), then the barrier. Without a pulled tail no peer reads this CTA's smem
    // with generic loads, so CTA-scope ordering plus an execution-only cluster barrier ("every peer is
    // done with its tiles") suffices, as in swap-AB; the tail's DSMEM loads need release / acquire.
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();
    if constexpr (kTail) {
      cluster_sync();
    } else {
      cluster_sync_relaxed();
    }
  } else {
    cluster_sync();  // every peer's (m, L, O) is complete and visible
  }
  dc::stamp(4);

  // Merge (SPEC §3.2 step 5) of the M tile's kSplits partials, in rank order.
  if constexpr (kPush) {
    // Push: send every peer of the M tile its slice of this CTA's export and this CTA's (m, L) row (one
    // bulk copy each, completing on the peer's recv_bar), arm recv_bar for what the peers send here, then
    // merge this split's slice from local smem (the own slice in place). Receive area: [kSplits - 1]
    // slices of kMg.slice tasks x 32 B, in sender order without the own split.
    unsigned char* recv = smem + kSm.recv;
    const int slice0 = split * kMg.slice;
    const int mine = min(kMg.slice, max(0, kMg.push_tasks - slice0));
    if (tid == 0) {
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           recv_bar,
                                           static_cast<cuda::std::uint32_t>((kSplits - 1) * (mine * 32 + kMlRowBytes)));
    }
    // Lane 0 of warp q sends split q of this M tile (one sending lane per warp: a warp's copies issue one
    // after another, ~50 ns each; swap-AB's timeline, session 4).
    static_assert(kSplits <= kHeadpadWarps, "one sending warp per split");
    const int q_to = tid / 32;
    if (tid % 32 == 0 && q_to < kSplits && q_to != split) {
      const int peer = kSplits * mt + q_to;
      const int n = min(kMg.slice, max(0, kMg.push_tasks - q_to * kMg.slice));
      cuda::std::uint64_t* bar = dc::map_rank_ptr(recv_bar, peer);
      if (n > 0) {
        void* dst = dc::map_rank_ptr(recv + (split < q_to ? split : split - 1) * kMg.slice * 32, peer);
        cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared, dst,
                                 smem + kSm.oexp + q_to * kMg.slice * 32, static_cast<cuda::std::uint32_t>(n * 32), bar);
      }
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared,
                               dc::map_rank_ptr(static_cast<void*>(ml), peer), ml,
                               static_cast<cuda::std::uint32_t>(kMlRowBytes), bar);
    }
    const float* mlx = reinterpret_cast<const float*>(smem + kSm.mlx);  // [kSplits][2][64]
    const float* cs = dc::cos_sin_row(p, t);
    // Pulled tail (kTail): this thread's one task's 2 * kSplits DSMEM loads go out before the wait, their
    // latency hidden behind the copies'. The tail goes first to the threads with one slice task fewer
    // (those from mine % 256 on). Warp-uniform: every bound is a multiple of 32.
    const int tail_i = (tid - mine % kHeadpadThreads + kHeadpadThreads) % kHeadpadThreads;
    const int tail_task = kMg.push_tasks + split * kMg.tail_slice + tail_i;
    const bool has_tail = kTail && tail_i < kMg.tail_slice && tail_task < kMg.tasks;
    float4 tv[kSplits][2];
    if (has_tail) {
      const unsigned off = sbase + kSm.oexp + oexp_off(tail_task >> 6, 4 * (tail_task & 63));
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {
        const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
        tv[q][0] = ld_cluster_v4(map_rank(off, peer));
        tv[q][1] = ld_cluster_v4(map_rank(off + 16, peer));
      }
    }
    while (!cuda::ptx::mbarrier_try_wait_parity(recv_bar, 0u)) {
    }
    // Task i of the slice: its 32 B at byte oexp_off(hl, 4 c8) - 32 * slice0 of every sender's copy (the
    // swizzle permutes chunks within aligned groups of 8 tasks, the slice starts at a multiple of 32).
#pragma unroll 1
    for (int i = tid; i < mine; i += kHeadpadThreads) {  // warp-uniform bound
      const int task = slice0 + i, hl = task >> 6, c8 = task & 63;
      const unsigned own = oexp_off(hl, 4 * c8);
      const unsigned rel = own - static_cast<unsigned>(slice0 * 32);
      float4 ov[kSplits][2];
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {
        const unsigned char* at =
            q == split ? smem + kSm.oexp + own : recv + (q < split ? q : q - 1) * (kMg.slice * 32) + rel;
        ov[q][0] = reinterpret_cast<const float4*>(at)[0];
        ov[q][1] = reinterpret_cast<const float4*>(at)[1];
      }
      merge_task(p, t, mt, hl, c8, ov, mlx, cs);
    }
    if (has_tail) merge_task(p, t, mt, tail_task >> 6, tail_task & 63, tv, mlx, cs);
  } else {
    // Pull (one split per M tile: no cluster, or 128 heads of a SWA-only layer). First the per-head weights,
    // once per CTA (thread hl): w_q = 2^(m_q - M) (0 for an empty part), den = sum_q w_q L_q + the sink
    // (not scaled by sm_scale), 0 when every part is empty. The P tiles are free now (no peer reads them).
    const int live = min(kHeadpadMTile, kH - kHeadpadMTile * mt);
    float* wts = reinterpret_cast<float*>(smem + kSm.p);     // fp32 [64][kSplits]
    float* den = reinterpret_cast<float*>(smem + kSm.p_lo);  // fp32 [64]
    static_assert(kHeadpadMTile * kHeadpadMaxCluster * 4 <= kHeadpadMTile * kHeadpadChunk * 2, "weights fit in P");
    if (tid < live) {
      float mq[kSplits], lq[kSplits];
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {  // every DSMEM load issued before the first use
        const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
        mq[q] = ld_cluster_f32(map_rank(sbase + kSm.ml + tid * 4, peer));
        lq[q] = ld_cluster_f32(map_rank(sbase + kSm.ml + (kHeadpadMTile + tid) * 4, peer));
      }
      float big_m = kNegInf;
#pragma unroll
      for (int q = 0; q < kSplits; ++q) big_m = fmaxf(big_m, mq[q]);
      float d = 0.0f;  // a token with no used entry: all-zero output (scale byte 105 in MXFP8)
#pragma unroll
      for (int q = 0; q < kSplits; ++q) {  // fixed rank order: deterministic (SPEC §3.3)
        const float w = big_m == kNegInf || mq[q] == kNegInf ? 0.0f : exp2f(mq[q] - big_m);
        wts[tid * kSplits + q] = w;
        d += w * lq[q];
      }
      if (big_m != kNegInf) {
        const float sink_l2 = p.sink != nullptr ? p.sink[kHeadpadMTile * mt + tid] * kLog2e : kNegInf;
        d += exp2f(sink_l2 - big_m);  // the sink, once, after the merge; d >= 1 here (or NaN for NaN inputs)
      }
      den[tid] = d;
    }
    __syncthreads();
    // Then the output: task = (head, 8-dim chunk), one thread each over the M tile's kSplits CTAs, in order,
    // so a quad holds one 32-dim block (write_out_chunk8). A thread issues its 2 * kSplits 16-B DSMEM loads
    // before the first use (docs/perf-notes.md, session 2). live * 64 is a multiple of 32: whole warps.
    {
      const float* cs = dc::cos_sin_row(p, t);
      for (int task = split * kHeadpadThreads + tid; task < live * 64; task += kSplits * kHeadpadThreads) {
        const int hl = task >> 6, c8 = task & 63;
        // Dims 8*c8.. are float pairs 4*c8..4*c8+3: under the pair swizzle (bits 2..4) still 32 contiguous bytes.
        const unsigned off = sbase + kSm.oexp + oexp_off(hl, 4 * c8);
        float4 ov[kSplits][2];
#pragma unroll
        for (int q = 0; q < kSplits; ++q) {
          const unsigned peer = static_cast<unsigned>(kSplits * mt + q);
          ov[q][0] = ld_cluster_v4(map_rank(off, peer));
          ov[q][1] = ld_cluster_v4(map_rank(off + 16, peer));
        }
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] = 0.0f;
#pragma unroll
        for (int q = 0; q < kSplits; ++q) {  // fixed rank order; an empty part (w = 0) contributes nothing
          const float w = wts[hl * kSplits + q];
          if (w != 0.0f) dc::add_weighted_chunk8(o, w, ov[q]);
        }
        // One division, then products (the swap-AB merge lost 4-5 % of its call time to 8 divisions).
        const float d = den[hl], inv = d != 0.0f ? 1.0f / d : 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] *= inv;
        dc::write_out_chunk8(p, t, kHeadpadMTile * mt + hl, c8, o, cs);  // inverse RoPE (step 7) + output (step 8)
      }
    }
  }
  dc::stamp(5);
  // No CTA exits while a peer may still read its smem (HOPPER_NOTES §5 exit rule): its DSMEM loads, or a
  // bulk copy out of it, which completes only on the receiver's recv_bar (waited above by every thread).
  // Execution only: every DSMEM load of this CTA has returned (its value was used), so the arrive is
  // relaxed; the release form compiles to MEMBAR.ALL.GPU, which would wait for the output stores.
  cluster_sync_relaxed();
  dc::stamp(6);
}

}  // namespace swapjit
