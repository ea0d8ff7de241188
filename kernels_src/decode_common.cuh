// decode_common.cuh: the device parts both decode kernels (swapab_decode, headpad_decode) share:
//   - Q gather of the live heads from the plain or chunk16 layout, with RoPE (SPEC §3.2 steps 1-2);
//   - the push merges' sending and receiving (st.async of 16-B pieces, the packed 24-bit units);
//   - the epilogue of one (head, 8-dim chunk): inverse RoPE (step 7) and the output write (step 8);
//   - thin inline-PTX wrappers (ldmatrix, mma.sync, griddepcontrol) that CCCL 3.0.1 does not wrap.
// The records' loads and exact dequantisation are in record_decode.cuh, the timeline's stamps in
// timeline_stamps.cuh (both included here). Everything is in namespace swapjit::dc so that names never collide
// with a family's own helpers.
// NOTE: device-only; compiled through NVRTC after the prelude (kKey, kVariant). Conversions come from
// fp_convert.cuh so that the kernels and kv_insert round the same way.
#pragma once
#include <cuda/ptx>

#include "export_pack24.cuh"
#include "fp_convert.cuh"
#include "kernel_params.cuh"
#include "key_shape.cuh"
#include "mxfp8_exponent.cuh"
#include "record_decode.cuh"
#include "timeline_stamps.cuh"

namespace swapjit {
namespace dc {

// log2(e): both kernels' softmax runs in base 2 (scores times sm_scale * kLog2e, exp2f), as FlashMLA does.
constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------------------------------------------
// Programmatic dependent launch (HOPPER_NOTES §6). Inline PTX: the runtime wrappers need an extra header
// under NVRTC. Before wait(): only launch-parameter arithmetic and smem init; nothing that reads inputs.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The generic address of the same shared-memory object in CTA `rank` of the cluster (mapa, generic form):
// what CCCL's cuda::ptx DSMEM operands (st_async, remote mbarriers) take.
template <class T>
__device__ __forceinline__ T* map_rank_ptr(T* p, int rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
  return reinterpret_cast<T*>(r);
}

// Cluster barriers of a cluster of C CTAs (HOPPER_NOTES §5); with C == 1 (no cluster) a CTA barrier. Every
// thread of the CTA calls them (the .aligned forms). cluster_sync: release / acquire, every CTA's writes
// before it are visible to all peers after it. cluster_sync_relaxed: only "every CTA got here" (the
// release arrive compiles to MEMBAR.ALL.GPU on sm_90, which waits for the thread's outstanding stores).
template <int C>
__device__ __forceinline__ void cluster_sync() {
  if constexpr (C > 1) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  } else {
    __syncthreads();
  }
}
// Its two halves, for a barrier whose arrive and wait lie apart (swap-AB's early pushes: the arrive at the
// kernel's start, the wait before the first push). CCCL's barrier_cluster_arrive / _wait emit the forms
// without .aligned.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
template <int C>
__device__ __forceinline__ void cluster_sync_relaxed() {
  if constexpr (C > 1) {
    cluster_arrive_relaxed();
    cluster_wait();
  } else {
    __syncthreads();
  }
}

// Arms this CTA's receive mbarrier (one local arrival, initialised with count 1) for `bytes` of incoming
// remote bytes (st.async): its phase completes when they have all landed.
__device__ __forceinline__ void expect_bytes(cuda::std::uint64_t* bar, unsigned bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}

// The push merges' sending (push_mapped, push_mapped_upto below): `bytes` (a multiple of 16, both ends 16-B
// aligned) from this CTA's `src` to a peer CTA, at the offset the local destination has here, in 16-B st.async
// stores (remote stores that complete their bytes on the peer's mbarrier at the offset the local one has
// here), spread over kThreads threads (`idx` = 0 .. kThreads - 1).
// Why not cp.async.bulk: a merge slice is 2-7 KB per peer and every CTA sends 5-15 of them; bulk copies of
// one SM go through its one copy engine one after another (~50 ns each), so the last left ~1 us after the
// publishing barrier (swapjit timeline: "copies issued", session 9). st.async needs no engine: every thread
// issues its few pieces at once.
// A push's remote ends: the peer's copies of the destination and of its mbarrier (generic DSMEM addresses).
// Mapped apart from the stores so that a caller can map them before the barrier that lets the pushes start:
// after it they were part of ~70 SASS instructions of address work ahead of the first st.async (session 23).
struct PeerPush {
  unsigned char* dst;
  cuda::std::uint64_t* bar;
};
__device__ __forceinline__ PeerPush map_push(unsigned char* local_dst, cuda::std::uint64_t* local_bar, int peer) {
  return PeerPush{map_rank_ptr(local_dst, peer), map_rank_ptr(local_bar, peer)};
}
// One thread's part of a push merge's sending (both kernels): the receiver `dest` (its index in the slice
// numbering: swap-AB's peer rank, the head-padded kernel's split), this thread's index `idx` in the group that
// pushes to it, the remote ends of this CTA's (m, L) row and of its slice there, the slice's bytes. Worked out
// before the publishing barrier (none of it reads the export or touches a peer); pinned() keeps the compiler
// from sinking the arithmetic past that barrier to its uses.
struct PushPlan {
  PeerPush ml, slice;
  int dest = -1, idx = 0, bytes = 0;  // dest -1: this thread pushes nothing
  __device__ __forceinline__ PushPlan& pinned() {
    asm volatile("" : "+r"(dest), "+r"(idx), "+r"(bytes));
    return *this;
  }
};
// One 16-B piece at `off` of `src` to the same offset of the peer's destination (st.async).
__device__ __forceinline__ void push_piece(const PeerPush& to, const unsigned char* src, int off) {
  const uint4 v = *reinterpret_cast<const uint4*>(src + off);
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  cuda::ptx::st_async(reinterpret_cast<unsigned*>(to.dst + off), w, to.bar);
}
template <int kThreads>
__device__ __forceinline__ void push_mapped(const PeerPush& to, const unsigned char* src, int bytes, int idx) {
  for (int off = 16 * idx; off < bytes; off += 16 * kThreads) push_piece(to, src, off);
}
// The same for at most kMaxBytes (a compile-time bound): unrolled with a guard per store, no trip-count
// arithmetic (a division by the thread count's stride) ahead of the first store; the plain loop past 4 rounds
// (code size: every launch fetches its code cold, perf-notes session 11).
template <int kThreads, int kMaxBytes>
__device__ __forceinline__ void push_mapped_upto(const PeerPush& to, const unsigned char* src, int bytes, int idx) {
  constexpr int kRounds = (kMaxBytes + 16 * kThreads - 1) / (16 * kThreads);
  if constexpr (kRounds > 4) {
    push_mapped<kThreads>(to, src, bytes, idx);
  } else {
#pragma unroll
    for (int round = 0; round < kRounds; ++round) {
      const int off = 16 * (idx + round * kThreads);
      if (off < bytes) push_piece(to, src, off);
    }
  }
}

// N (4 or 8) values of a packed merge task (both kernels' push merges): dims d .. d + N - 1 (d = 0, 4, 8 or 12 within the unit at `unit`): their
// high halves at 2 d, their elements at kLoOffset + 2 (d & 7), each value one prmt (export_pack24.cuh kDimSel).
template <int N>
__device__ __forceinline__ void unpack_task(const unsigned char* unit, int d, float4 (&v)[N / 4]) {
  unsigned hw[N / 2], lw[N / 2];
  if constexpr (N == 8) {
    const uint4 a = *reinterpret_cast<const uint4*>(unit + 2 * d), b = *reinterpret_cast<const uint4*>(unit + pack24::kLoOffset);
    hw[0] = a.x, hw[1] = a.y, hw[2] = a.z, hw[3] = a.w;
    lw[0] = b.x, lw[1] = b.y, lw[2] = b.z, lw[3] = b.w;
  } else {
    const uint2 a = *reinterpret_cast<const uint2*>(unit + 2 * d);
    const uint2 b = *reinterpret_cast<const uint2*>(unit + pack24::kLoOffset + 2 * (d & 7));
    hw[0] = a.x, hw[1] = a.y;
    lw[0] = b.x, lw[1] = b.y;
  }
  const unsigned half = (d >> 3) & 1, s0 = pack24::kDimSel[0][0] + 0x11u * half, s1 = pack24::kDimSel[0][1] + 0x11u * half;
  float o[N];
#pragma unroll
  for (int k = 0; k < N / 2; ++k) {
    o[2 * k] = __uint_as_float(dc::prmt(hw[k], lw[k], s0));
    o[2 * k + 1] = __uint_as_float(dc::prmt(hw[k], lw[k], s1));
  }
#pragma unroll
  for (int k = 0; k < N / 4; ++k) v[k] = make_float4(o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The dynamic smem base rounded up to 1024 B (SW128 operand atoms, HOPPER_NOTES §7), within the plan's
// 1024 B of slack; every CTA of a cluster rounds the same way, so peers' regions keep their offsets.
__device__ __forceinline__ unsigned char* align_smem_1024(unsigned char* base) {
  return base + ((1024u - (smem_addr(base) & 1023u)) & 1023u);
}

// ---------------------------------------------------------------------------------------------------
// Warp-level MMA building blocks (HOPPER_NOTES §2). Fragments follow the PTX m16n8k16 layouts:
// lane l holds C rows l/4 and l/4+8, columns 2(l%4) and +1.
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// stmatrix (non-trans) of N (2 or 4) 8x8 b16 matrices (sm_90): fragment row l / 4 of matrix m (columns 2 (l % 4)
// and + 1) goes to the 16-B row at the address lane 8 m + l / 4 gives.
template <int N>
__device__ __forceinline__ void stmatrix(unsigned addr, const unsigned* r) {
  static_assert(N == 2 || N == 4, "x2 or x4");
  if constexpr (N == 2) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1,%2};" ::"r"(addr), "r"(r[0]), "r"(r[1]) : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
  }
}
// stmatrix.trans of N (1, 2 or 4) 8x8 b16 matrices (sm_90): the fragment element (row l / 4, columns 2 (l % 4)
// and + 1) of matrix m goes to row (column of the fragment) at the address lane 8 m + column gives, so the
// stored rows are the fragment's columns (HOPPER_NOTES §2).
template <int N>
__device__ __forceinline__ void stmatrix_trans(unsigned addr, const unsigned* r) {
  static_assert(N == 1 || N == 2 || N == 4, "x1, x2 or x4");
  if constexpr (N == 1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(addr), "r"(r[0]) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};" ::"r"(addr), "r"(r[0]), "r"(r[1])
                 : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
  }
}

__device__ __forceinline__ void ldmatrix_x2(unsigned addr, unsigned (&r)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
// d += a * b, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------------------------------
// Q gather (SPEC §3.1 q_layout, §3.2 steps 1-2), split in a load and a RoPE step so that callers can
// issue several loads before the first use. q_load_chunk8 returns the 8 bf16 values of head h, dims
// 8*c8..8*c8+7 of token t as one 16-byte image (8 consecutive elements in both layouts).
__device__ __forceinline__ const u16* q_chunk8_src(const DecodeParams& p, int t, int h, int c8) {
  static_assert(kKey.q_layout == kQLayoutChunk16 || kKey.q_layout == kQLayoutPlain, "decode needs a q_layout");
  const int d0 = c8 * 8;
  i64 off;
  if constexpr (kKey.q_layout == kQLayoutChunk16) {
    off = static_cast<i64>(t) * p.q_token_stride + static_cast<i64>(d0 / 16) * (p.q_h_pad * 16) + h * 16 +
          (d0 % 16);
  } else {
    off = static_cast<i64>(t) * p.q_token_stride + h * kHeadDim + d0;
  }
  return p.q + off;
}

// Whether every 8-dim chunk of Q is 16-byte aligned: the base and the token stride (every other term of
// q_chunk8_src's offset is a multiple of 8 elements). One uniform test instead of one per chunk.
__device__ __forceinline__ bool q_chunks_aligned(const DecodeParams& p) {
  return (reinterpret_cast<unsigned long long>(p.q) & 15ull) == 0 && (p.q_token_stride & 7) == 0;
}

__device__ __forceinline__ uint4 q_load_chunk8(const DecodeParams& p, int t, int h, int c8) {
  const u16* src = q_chunk8_src(p, t, h, c8);
  if ((reinterpret_cast<unsigned long long>(src) & 15ull) == 0) {  // strides are run-time: check alignment
    return *reinterpret_cast<const uint4*>(src);
  }
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = static_cast<unsigned>(src[2 * i]) | (static_cast<unsigned>(src[2 * i + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The RoPE coefficients of one 8-dim chunk: cos and sin of its 4 angles (chunks 56..63; unused below).
// Loaded once into registers by a thread whose Q chunks all share c8 (both kernels' Q loops give each
// thread one c8): read inside the store loop instead, they would be loaded again after every st.shared
// (its "memory" clobber), one global latency per chunk.
struct RopeCoefs {
  float c[4], s[4];
};
__device__ __forceinline__ RopeCoefs rope_coefs(int c8, const float* cs) {
  RopeCoefs r{};
  const int d0 = c8 * 8;
  if (d0 >= kNoRopeDims) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int pair = (d0 - kNoRopeDims) / 2 + i;  // GPT-J interleaved: (448+2i, 449+2i) at angle i
      r.c[i] = cs[pair];
      r.s[i] = cs[kRopePairs + pair];
    }
  }
  return r;
}

// RoPE on a loaded chunk (dims 8*c8..): identity below dim 448; on dims 448..511 the fp32 fma form of
// SPEC §3.2 step 2, then bf16 RN, with the chunk's coefficients from rope_coefs.
__device__ __forceinline__ uint4 q_rope_chunk8(uint4 v, int c8, const RopeCoefs& k) {
  if (c8 * 8 < kNoRopeDims) return v;
  unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float c = k.c[i], s = k.s[i];
    const float x0 = fp::bf16_to_float(static_cast<unsigned short>(w[i] & 0xFFFFu));
    const float x1 = fp::bf16_to_float(static_cast<unsigned short>(w[i] >> 16));
    // y0 = fma(x0, c, -(x1*s)), y1 = fma(x0, s, x1*c): the products are rounded separately, by hand.
    const float y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
    const float y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
    w[i] = fp::pack_bf16x2_rn(y0, y1);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ const float* cos_sin_row(const DecodeParams& p, int t) {
  return p.cos_sin + p.positions[t] * 64;  // [max_pos, 64]
}

// ---------------------------------------------------------------------------------------------------
// One part of a merge of N-dim chunks (N = 4 or 8): o[i] += w * v[i] (v = N / 4 float4 of dims +0..3,
// +4..7). The callers loop over the cluster's parts in rank order (SPEC §3.3), so the sums are the same on
// every run.
template <int N>
__device__ __forceinline__ void add_weighted_chunk(float (&o)[N], float w, const float4 (&v)[N / 4]) {
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    o[4 * i] += w * v[i].x;
    o[4 * i + 1] += w * v[i].y;
    o[4 * i + 2] += w * v[i].z;
    o[4 * i + 3] += w * v[i].w;
  }
}

// Epilogue of one (head h, N-dim chunk c) of token t, N = 8 or 4: inverse RoPE (SPEC §3.2 step 7) and the
// output write (step 8). One thread per N dims rather than one warp per 32-dim block: the merge before it
// then needs one DSMEM round (or smem read) per N dims, not per dim. N = 4 spreads a merge over twice the
// threads: the merge is one dependent chain per thread, and with 4 of 16 warps busy it ran at ~5 cycles an
// instruction (swapjit timeline, session 7). BLOCK-COLLECTIVE: the 32 / N lanes of one aligned lane group
// call it together for the chunks of one 32-dim block (c = (32 / N) * blk + lane % (32 / N)), with the same
// h; every lane of the warp must be in the call (the shuffles use the full mask). o[i] is the final fp32
// output of dim N*c + i (merged, divided, sink applied). Inverse RoPE pairs (448+2i, 449+2i) lie inside
// one chunk: no shuffle for them. cs: the token's cos_sin row ([64] fp32, read on dims 448.. only).
template <int N>
__device__ __forceinline__ void write_out_chunk(const DecodeParams& p, int t, int h, int c, float (&o)[N],
                                                const float* cs) {
  static_assert(N == 4 || N == 8, "chunks of 4 or 8 dims");
  constexpr int kLanesPerBlock = 32 / N;
  const int d0 = c * N;
  if (d0 >= kNoRopeDims) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const int pair = (d0 - kNoRopeDims) / 2 + i;
      const float cc = cs[pair], s = cs[kRopePairs + pair];
      const float x0 = o[2 * i], x1 = o[2 * i + 1];
      // y0 = x0*c + x1*s, y1 = -x0*s + x1*c, each product rounded (no contraction, so any build agrees).
      o[2 * i] = __fadd_rn(__fmul_rn(x0, cc), __fmul_rn(x1, s));
      o[2 * i + 1] = __fadd_rn(-__fmul_rn(x0, s), __fmul_rn(x1, cc));
    }
  }
  if constexpr (kKey.out_layout == kOutMxfp8Ofused) {
    float amax = fabsf(o[0]);
#pragma unroll
    for (int i = 1; i < N; ++i) amax = fmaxf(amax, fabsf(o[i]));
#pragma unroll
    for (int x = 1; x < kLanesPerBlock; x *= 2)  // the block's other chunks
      amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, x));
    amax = fmaxf(amax, 1e-4f);  // an all-zero block gives e = -22, scale byte 105 (SPEC §3.2 step 8)
    const int e = mxfp8::block_exponent(__float_as_uint(amax));  // = ceil_log2_exponent(fl32(amax / 448))
    const float inv = fp::exp2_int(-e);
    unsigned w[N / 4];
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const unsigned c01 = fp::float2_to_e4m3x2(__fmul_rn(o[4 * i], inv), __fmul_rn(o[4 * i + 1], inv));
      const unsigned c23 = fp::float2_to_e4m3x2(__fmul_rn(o[4 * i + 2], inv), __fmul_rn(o[4 * i + 3], inv));
      w[i] = c01 | (c23 << 16);
    }
    const int g = h / kHeadsPerGroup, hg = h % kHeadsPerGroup, blk = c / kLanesPerBlock;
    // data: fp8 [N_total, n_groups_alloc, 4096]; in group g, (hg, d) at (d/32)*256 + hg*32 + d%32
    u8* data = p.out_data + (static_cast<i64>(t) * p.n_groups_alloc + g) * kGroupDataBytes + blk * 256 +
               hg * 32 + (c % kLanesPerBlock) * N;
    if ((reinterpret_cast<unsigned long long>(data) & (N - 1)) == 0) {  // the base is a run-time pointer
      if constexpr (N == 8) {
        *reinterpret_cast<uint2*>(data) = make_uint2(w[0], w[1]);
      } else {
        *reinterpret_cast<unsigned*>(data) = w[0];
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) data[i] = static_cast<u8>(w[i / 4] >> (8 * (i % 4)));
    }
    if ((c % kLanesPerBlock) == 0) {
      // scales: int32 view with strides (1, 32*N4, N4); block b = (d/32)*8 + hg; byte b%4 of that int32.
      const i64 n4 = (p.n_total + 3) / 4 * 4;
      const int b = blk * kHeadsPerGroup + hg;
      u8* sc = reinterpret_cast<u8*>(p.out_scale) + 4 * (t + g * 32 * n4 + static_cast<i64>(b / 4) * n4) + (b % 4);
      *sc = static_cast<u8>(e + 127);
    }
  } else {
    u16* dst = p.out_bf16 + static_cast<i64>(t) * p.out_token_stride + h * kHeadDim + d0;
    unsigned w[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = fp::pack_bf16x2_rn(o[2 * i], o[2 * i + 1]);
    if ((reinterpret_cast<unsigned long long>(dst) & (2 * N - 1)) == 0) {  // out_token_stride is run-time
      if constexpr (N == 8) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
        *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) dst[i] = static_cast<u16>(w[i / 2] >> (16 * (i % 2)));
    }
  }
}

}  // namespace dc
}  // namespace swapjit
