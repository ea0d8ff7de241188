// decode_common.cuh: the device parts both decode kernels (swapab_decode, headpad_decode) share:
//   - Q gather of the live heads from the plain or chunk16 layout, with RoPE (SPEC §3.2 steps 1-2);
//   - exact dequantisation of a KV record to bf16, 16 dims at a time, per format (SPEC §2.1, §2.2);
//   - the epilogue of one (head, 8-dim chunk): inverse RoPE (step 7) and the output write (step 8);
//   - thin inline-PTX wrappers (ldmatrix, mma.sync, griddepcontrol) that CCCL 3.0.1 does not wrap.
// Everything is in namespace swapjit::dc so that names never collide with a family's own helpers.
// NOTE: device-only; compiled through NVRTC after the prelude (kKey, kVariant). Conversions come from
// fp_convert.cuh so that the kernels and kv_insert round the same way.
#pragma once
#include <cuda/ptx>

#include "e2m1_prmt_tables.cuh"
#include "export_pack24.cuh"
#include "fp_convert.cuh"
#include "kernel_params.cuh"
#include "key_shape.cuh"
#include "mxfp8_exponent.cuh"

namespace swapjit {
namespace dc {

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
template <int C>
__device__ __forceinline__ void cluster_sync_relaxed() {
  if constexpr (C > 1) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
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
// KV records (SPEC §2.1): slot s of a cache with P slots per page, format Fmt.
template <int Fmt, int P>
struct RecordPtrs {
  const u8* data;   // [D] bytes of the slot's data row
  const u8* scale;  // [S] bytes of the slot's scale row
};

template <int Fmt, int P>
__device__ __forceinline__ RecordPtrs<Fmt, P> record_ptrs(const CacheView& c, int slot) {
  constexpr int D = record_data_bytes(Fmt);
  constexpr int S = record_scale_bytes(Fmt);
  const int page = slot / P;  // slot >= 0 here; P is a compile-time power of two
  const int off = slot % P;
  const u8* pg = c.base + static_cast<i64>(page) * c.page_stride;  // page_stride is run-time, never P-derived
  return {pg + off * D, pg + P * D + off * S};
}

__device__ __forceinline__ uint4 ld_nc_16(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ uint2 ld_nc_8(const void* p) {
  uint2 r;
  asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_nc_u8(const void* p) {
  unsigned short r;
  asm volatile("ld.global.nc.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}

// Four e4m3 codes (one 32-bit word, first dim in the low byte) times an exact power-of-two multiplier
// -> two packed bf16x2 words. Exact: e4m3 has <= 4 significant bits and the product stays normal for the
// scale bytes a writer emits (HOPPER_NOTES §3), so both the fp32 multiply and the bf16 rounding are exact.
__device__ __forceinline__ void e4m3x4_scaled(unsigned w, float mult, unsigned& out01, unsigned& out23) {
  float a, b, c, d;
  fp::e4m3x2_to_float2(static_cast<unsigned short>(w & 0xFFFFu), a, b);
  fp::e4m3x2_to_float2(static_cast<unsigned short>(w >> 16), c, d);
  out01 = fp::pack_bf16x2_rn(a * mult, b * mult);
  out23 = fp::pack_bf16x2_rn(c * mult, d * mult);
}

// Eight e2m1 codes (one 32-bit word, even dim in the low nibble) times an e4m3 scale (as bf16x2 {s, s})
// -> four bf16x2: the codes' values by byte-permute table lookups, then one bf16x2 multiply per pair
// (`mul.bf16x2` needs sm_90, as every decode key does: jit/compile_key.cpp). A magnitude (3 bits) selects
// its bf16's low byte from the table {00 00 80 C0 00 40 80 C0} and its high byte from
// {00 3F 3F 3F 40 40 40 40} (0, .5, 1, 1.5, 2, 3, 4, 6); a third permute moves each code's sign bit to bit
// 15 / 31. The product e2m1 * e4m3 has <= 6 significant bits and stays normal (>= 2^-10), so the bf16
// multiply is exact: the bits of the reference's decode. Why: the fp32 path it replaced (session 7) took
// ~9 instructions per 2 dims, ~1.2 us of a 128-slot tile (32 heads, T = 16: the fp4 pairing 16.2 us
// against 15.0 for fp8); this takes ~23 per 8 dims. A NaN scale propagates; a negative zero code keeps its
// sign (mul, not fma with a +0 addend).
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
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

// The e4m3 scale byte as bf16x2 {s, s}: exact (3 mantissa bits), NaN stays NaN.
__device__ __forceinline__ unsigned e4m3_scale_bf16x2(unsigned char scale) {
  const unsigned b = __float_as_uint(fp::e4m3_to_float(scale)) >> 16;
  return b | (b << 16);
}
__device__ __forceinline__ void e2m1x8_scaled(unsigned w, unsigned scale2, unsigned (&out)[4]) {
  namespace t = e2m1_prmt;  // the tables and selectors (e2m1_prmt_tables.cuh; replayed by a host test)
  const unsigned m = w & t::kMagnitudes, mh = m >> 16;
  const unsigned l_lo = prmt(t::kLowA, t::kLowB, m), h_lo = prmt(t::kHighA, t::kHighB, m);     // codes 0..3
  const unsigned l_hi = prmt(t::kLowA, t::kLowB, mh), h_hi = prmt(t::kHighA, t::kHighB, mh);   // codes 4..7
  out[0] = prmt(l_lo, h_lo, t::kPairLow);  // [L(c0) H(c0) L(c1) H(c1)]
  out[1] = prmt(l_lo, h_lo, t::kPairHigh);
  out[2] = prmt(l_hi, h_hi, t::kPairLow);
  out[3] = prmt(l_hi, h_hi, t::kPairHigh);
  const unsigned w4 = w << 4;  // bit 7 of byte k: the sign of code 2k (w's own bit 7 of byte k: code 2k+1)
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned sign = prmt(w4, w, t::sign_selector(k)) & t::kSignBits;
    unsigned d;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(out[k] | sign), "r"(scale2));
    out[k] = d;
  }
}

// The raw bytes of one 16-dim piece of a record, loaded but not yet decoded. Splitting load from decode
// lets a caller issue the loads of several pieces before the first decode (latency hiding); the values are
// the same either way.
struct RawPiece16 {
  uint4 a;         // v41_fp8 / v4_fp8 e4m3: 16 codes; v41_fp4: .x/.y = 16 codes; v4_fp8 RoPE: dims +0..+7
  uint4 b;         // v4_fp8 RoPE pieces only: dims +8..+15 (bf16 as stored)
  unsigned scale;  // the piece's scale byte
};

// kMayRope = false: the caller knows the piece is not a v4_fp8 RoPE piece (no .b, no run-time test).
// kScale = false: the caller loads the scale bytes itself (several pieces' at once) and sets .scale.
template <int Fmt, int P, bool kMayRope = true, bool kScale = true>
__device__ __forceinline__ RawPiece16 load_piece16(const RecordPtrs<Fmt, P>& r, int piece) {
  RawPiece16 w;
  w.b = make_uint4(0, 0, 0, 0);
  if constexpr (Fmt == kFormatV41Fp8) {
    w.a = ld_nc_16(r.data + piece * 16);       // 16 x e4m3
    if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece / 2);  // UE8M0, 32-dim tiles
  } else if constexpr (Fmt == kFormatV41Fp4) {
    const uint2 d = ld_nc_8(r.data + piece * 8);  // 16 x e2m1
    w.a = make_uint4(d.x, d.y, 0, 0);
    if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece);  // e4m3, 16-dim tiles
  } else {
    static_assert(Fmt == kFormatV4Fp8, "unknown record format");
    if (!kMayRope || piece < kNoRopeDims / 16) {  // 448 e4m3 dims, 64-dim UE8M0 tiles
      w.a = ld_nc_16(r.data + piece * 16);
      if constexpr (kScale) w.scale = ld_nc_u8(r.scale + piece / 4);
    } else {  // RoPE dims as stored bf16: bytes 448 + 32 * (piece - 28)
      const u8* src = r.data + kNoRopeDims + (piece - kNoRopeDims / 16) * 32;
      w.a = ld_nc_16(src);
      w.b = ld_nc_16(src + 16);
      w.scale = 0;
    }
  }
  return w;
}

// Decodes a loaded piece exactly to bf16 (SPEC §2.2). lo holds dims +0..+7, hi dims +8..+15, each as 4
// packed bf16x2 words (even dim in the low half), i.e. the 16-byte memory image of 8 consecutive bf16.
template <int Fmt, bool kMayRope = true>
__device__ __forceinline__ void decode_piece16(const RawPiece16& w, int piece, uint4& lo, uint4& hi) {
  if constexpr (Fmt == kFormatV41Fp4) {
    const unsigned scale2 = e4m3_scale_bf16x2(static_cast<unsigned char>(w.scale));
    unsigned a[4], b[4];
    e2m1x8_scaled(w.a.x, scale2, a);
    e2m1x8_scaled(w.a.y, scale2, b);
    lo = make_uint4(a[0], a[1], a[2], a[3]);
    hi = make_uint4(b[0], b[1], b[2], b[3]);
  } else {
    if (Fmt == kFormatV4Fp8 && kMayRope && piece >= kNoRopeDims / 16) {
      lo = w.a;
      hi = w.b;
      return;
    }
    const float mult = fp::ue8m0_to_float(w.scale);
    e4m3x4_scaled(w.a.x, mult, lo.x, lo.y);
    e4m3x4_scaled(w.a.y, mult, lo.z, lo.w);
    e4m3x4_scaled(w.a.z, mult, hi.x, hi.y);
    e4m3x4_scaled(w.a.w, mult, hi.z, hi.w);
  }
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

// ---------------------------------------------------------------------------------------------------
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
