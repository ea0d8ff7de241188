// headpad_decode.cuh: the head-padded sparse decode attention (SPEC.md §3), variants "wgmma" (sm_90a:
// warpgroup MMA, headpad_tile_wgmma.cuh) and "mma" (mma.sync m16n8k16 bf16, any sm_90+,
// headpad_tile_mma.cuh); everything but the chunk's two GEMMs is shared. Heads on the MMA's M side, padded
// to 64 (Q rows of padded heads are zero and never written). One thread-block cluster per decode token;
// cluster rank r works on M tile r / splits and on a contiguous share of the token's chunk list (SWA chunks
// then compressed chunks, 64 slots each, a chunk never straddling the two lists). Per chunk: gather + exact
// dequant to a bf16 tile in smem, S = Q K^T, online softmax per head row (log2 domain), O += P_hi V + P_lo V
// with P split into two bf16 parts (SPEC §3.2 step 6). NOTE: P rounded to bf16 alone (FlashMLA's choice)
// moves an output by up to ~2^-9 of |V| on peaked rows, which exceeds SPEC §4's 1.1e-3 MXFP8 element bound
// on the H200 test cases; the split costs a second P V MMA per tile and makes P's rounding negligible
// (~2^-17). Then the CTAs of one M tile merge their (m, L, O) partials over the cluster (st.async pushes, or
// DSMEM loads) in fixed rank order, apply the sink once, and the shared epilogue (decode_common.cuh) does
// inverse RoPE and the output write. Shapes, layouts and the smem plan: headpad_traits.cuh; constants and
// helpers: headpad_shape.cuh; Q's tile and the chunks' gather: headpad_gather.cuh; the merge:
// headpad_merge.cuh; the GEMMs: headpad_tile_wgmma.cuh / headpad_tile_mma.cuh. Determinism: no atomics, fixed
// orders only. Code size matters here: every launch fetches the executed code cold (perf-notes, session 11).
#pragma once
#include "headpad_gather.cuh"
#include "headpad_merge.cuh"
#include "headpad_shape.cuh"
#include "headpad_tile_mma.cuh"
#include "headpad_tile_wgmma.cuh"  // instantiated only by wgmma (sm_90a) keys

namespace swapjit {
namespace hp {

// The packed export (kPacked; export_pack24.cuh) of a warp's O accumulators: rows (heads) 16 hg + l / 4 and
// + 8, dims 256 dh + 8 nt + 2 (l % 4), + 1 in o[nt] (the m16n8 layout). Per 16-dim block b (n-tiles 2k, 2k + 1):
// the high halves of each n-tile's row pair are one stmatrix word (non-trans: fragment row = head = stored
// row), four matrices in one x4; the low bytes of dims (r, r + 8) pair up across the two n-tiles into the
// elements' word, two matrices in one x2. Lane 8 m + k gives matrix m's row k. kLive % 16 == 0 or 8: a warp
// with live rows has all 16 live, except at 8 live heads, whose rows 8..15 are sent to a dead scratch row
// (P, free since the last P V retired).
__device__ __forceinline__ void export_packed(const float (&o)[32][4], unsigned base, int hg, int dh, int lane) {
  namespace pk = pack24;
  const int mat = lane >> 3, row = lane & 7;
  const int h_hi = 16 * hg + 8 * (mat & 1) + row;  // hi x4: matrices (n-tile 2k, 2k + 1) x (rows 0-7, 8-15)
  const bool dead = h_hi >= kLive;                 // 8 live heads: rows 8..15
  const unsigned scratch = base - kSm.oexp + kSm.p + row * pk::kUnitBytes;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int blk = 16 * dh + k;  // 16-dim block of the head's 512 dims
    unsigned x[2][4];             // [n-tile 2k + j][element]
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[j][e] = pk::round24(__float_as_uint(o[2 * k + j][e]));
    // x4 registers = matrices 0..3: (n-tile 2k, rows 0-7), (2k, rows 8-15), (2k + 1, rows 0-7), (2k + 1, 8-15).
    const unsigned hi[4] = {dc::prmt(x[0][0], x[0][1], pk::kHiPair), dc::prmt(x[0][2], x[0][3], pk::kHiPair),
                            dc::prmt(x[1][0], x[1][1], pk::kHiPair), dc::prmt(x[1][2], x[1][3], pk::kHiPair)};
    // Elements (row r: dims 2c, 2c + 1 of this n-tile pair) = [lo(d), lo(d + 8)]: rows 0-7, then 8-15.
    const unsigned lo[2] = {
        dc::prmt(dc::prmt(x[0][0], x[1][0], pk::kLoPair), dc::prmt(x[0][1], x[1][1], pk::kLoPair), pk::kLoQuad),
        dc::prmt(dc::prmt(x[0][2], x[1][2], pk::kLoPair), dc::prmt(x[0][3], x[1][3], pk::kLoPair), pk::kLoQuad)};
    const unsigned unit = dead ? scratch : base + pk::unit_index(h_hi, blk) * pk::kUnitBytes;
    dc::stmatrix<4>(unit + 16 * (mat >> 1), hi);
    dc::stmatrix<2>(unit + pk::kLoOffset, lo);  // lanes 0..15 address: rows (mat & 1) * 8 + row
  }
}

// The whole kernel for one cluster shape (headpad_shape.cuh Shape): its constants shadow the portable
// shape's; everything else is shared.
template <class Sh>
__device__ __forceinline__ void decode_token(const DecodeParams& p) {
  constexpr int kSplits = Sh::kSplits, kCluster = Sh::kCluster;
  constexpr HeadpadSmem kSm = Sh::kSm;
  constexpr bool kPush = Sh::kPush, kTail = Sh::kTail, kPacked = Sh::kPacked;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  dc::stamp(0);  // timeline builds only: the kernel's first instruction (as swap-AB's)
  // wgmma operands start 1024-B aligned: the plan has the slack for it (headpad_align_slack).
  unsigned char* smem = kWgmma ? dc::align_smem_1024(smem_raw) : smem_raw;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int hg = warp % 4;  // heads 16*hg .. 16*hg+15 of the M tile
  const int dh = warp / 4;  // S: slots 32*dh..; O: dims 256*dh..
  // The token and the first of this cluster's heads: p.head_groups clusters a token, kH heads each (a layer
  // of kH * head_groups heads split over clusters at small steps: runtime/dispatch.hpp headpad_head_groups).
  const int cl = blockIdx.x / kCluster;
  const int t = cl / p.head_groups;
  const unsigned rank = cluster_rank();
  const int mt = static_cast<int>(rank) / kSplits;     // M tile: heads 64*mt .. 64*mt+63 of the key's kH
  const int hb = (cl - t * p.head_groups) * kH + kHeadpadMTile * mt;  // the M tile's first head in the layer
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

  // Q of this M tile (SPEC §3.2 steps 1-2), padded heads as zero rows (headpad_gather.cuh).
  load_q_tile(p, t, hb, sbase + kSm.q, reinterpret_cast<float*>(smem + kSm.cs));
  dc::stamp(7);  // timeline builds only: Q rotated and stored
  // The first two chunks, one into each KV buffer, before the loop: it then computes chunk c + 1 right after
  // chunk c, and only a CTA's third and later chunks are gathered inside it. A gather beside the tensor cores
  // is slow: chunk 2's under chunk 1's P V took 2.1 us after P V's 0.9 us issue, the same gather alone here
  // 1.8 us (64 heads T = 16; under S instead: 3.0 us; swapjit timeline, perf-notes session 28). A rolled loop:
  // one gather site, fetched once.
#pragma unroll 1
  for (int k = 0; k < 2 && c_begin + k < c_end; ++k) {
    gather<true>(p, t, chunk_at(c_begin + k, swa_chunks, swa_len, comp_len),
           sbase + kSm.kv + k * (kHeadpadChunk * kHeadpadRowBytes), valid + k * kHeadpadChunk);
    if (k == 0) dc::stamp(19);  // timeline builds only: thread 0's part of the first chunk stored
  }
  dc::stamp_warp();  // timeline builds only: this warp's part of Q and the first two chunks stored
  if constexpr (kWgmma) wg::fence_operand_stores();  // Q and the KV chunks before the first wgmmas
  __syncthreads();
  dc::stamp(2);
  dc::stamp_warp_spread(22, 23);  // timeline builds only: the slowest and the fastest warp's Q and first chunks

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
    // Records of chunk c + 2 (a third or later chunk) start moving to L2 now; its gather after P V below then
    // mostly hits L2.
    if (c + 2 < c_end) prefetch(p, t, chunk_at(c + 2, swa_chunks, swa_len, comp_len));

    // S[16 heads][32 slots] = Q K^T over 512 dims (headpad_tile_*.cuh).
    float s[4][4];
    if constexpr (kWgmma) {
      scores_wgmma(sbase, kv, dh, s);
    } else {
      scores_mma(sbase, kv, hg, dh, s);
    }
    dc::stamp(12);  // timeline builds only (this and the loop's other points: the last chunk's): S retired
    if (c == c_begin) dc::stamp(16);  // the first chunk's (timeline builds only, as 17..20: empty otherwise)

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
    if constexpr (kWgmma) wg::fence_operand_stores();  // P (generic st.shared) before the wgmmas read it
    __syncthreads();
    dc::stamp(13);  // timeline builds only: softmax done, P stored
    if (c == c_begin) dc::stamp(17);

    // O = alpha O + P V (headpad_tile_*.cuh), which reads kv[buf] and P; then chunk c + 2, if any, into kv[buf]
    // once both warpgroups' P V are done with it.
    // The first chunk's O is still zero: no rescale, whose 128 multiplications a thread (~256 issue cycles
    // SM-wide) sat between the softmax's barrier and P V's first wgmma (session 29 runs 1-2: -0.4 to -1.0 %).
    if (c != c_begin) {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[i][0] *= alpha[0]; o[i][1] *= alpha[0];
        o[i][2] *= alpha[1]; o[i][3] *= alpha[1];
      }
    }
    if constexpr (kWgmma) {
      pv_issue_wgmma(sbase, kv, dh, o);
    } else {
      pv_mma(sbase, kv, hg, dh, o);
    }
    dc::stamp(14);  // timeline builds only: P V issued
    if (c == c_begin) dc::stamp(18);
    if constexpr (kWgmma) {
      pv_wait_wgmma(o);
      dc::stamp(15);  // timeline builds only: P V retired
      if (c == c_begin) dc::stamp(20);
    }
    if (c + 2 < c_end) {
      __syncthreads();  // both warpgroups' P V of chunk c have read kv[buf]
      gather(p, t, chunk_at(c + 2, swa_chunks, swa_len, comp_len), kv, valid + buf * kHeadpadChunk);
      if constexpr (kWgmma) wg::fence_operand_stores();  // the gather's st.shared before chunk c + 2's wgmmas
    }
    __syncthreads();  // kv[buf] (chunk c + 2) complete; P and red free for the next iteration
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
  if constexpr (kPacked) {
    if (16 * hg < kLive) export_packed(o, sbase + kSm.oexp, hg, dh, lane);  // warps of padded rows only: nothing
  } else {
#pragma unroll
    for (int nt = 0; nt < 32; ++nt) {
      const int pair = (256 * dh + 8 * nt) / 2 + lane % 4;
      if (row0 < kLive)
        *reinterpret_cast<float2*>(smem + kSm.oexp + oexp_off(row0, pair)) = make_float2(o[nt][0], o[nt][1]);
      if (row0 + 8 < kLive)
        *reinterpret_cast<float2*>(smem + kSm.oexp + oexp_off(row0 + 8, pair)) = make_float2(o[nt][2], o[nt][3]);
    }
  }
  __syncthreads();
  if (tid < kHeadpadMTile) ml[kHeadpadMTile + tid] = red[tid] + red[kHeadpadMTile + tid];
  dc::launch_dependents();
  // The pushes' peers and remote ends, and recv_bar armed, before the barriers below (headpad_merge.cuh).
  const dc::PushPlan pushes = plan_pushes<Sh>(smem, mt, split, recv_bar, ml);
  arm_receive<Sh>(split, recv_bar);
  if constexpr (kPush) {
    // The merge's threads read the export and this CTA's (m, L) with generic loads and push them into the
    // peers' dead KV / Q / P tiles (st.async): a CTA barrier orders the export before those loads. Without a
    // pulled tail no peer reads this CTA's smem, so an execution-only cluster barrier ("every peer is done
    // with its tiles") suffices, as in swap-AB; the tail's DSMEM loads need release / acquire.
    __syncthreads();
    if constexpr (kTail) {
      dc::cluster_sync<kCluster>();
    } else {
      dc::cluster_sync_relaxed<kCluster>();
    }
  } else {
    dc::cluster_sync<kCluster>();  // every peer's (m, L, O) is complete and visible
  }
  dc::stamp(4);

  merge<Sh>(p, t, mt, hb, split, smem, recv_bar, ml, pushes);  // SPEC §3.2 step 5 (headpad_merge.cuh)
  dc::stamp(5);
  // No CTA exits while a peer may still read or write its smem (HOPPER_NOTES §5 exit rule): the pull merge's and
  // the pulled tail's DSMEM loads read it, so those end with a cluster barrier, execution only (every DSMEM load
  // of this CTA has returned: its value was used; the release form compiles to MEMBAR.ALL.GPU, which would wait
  // for the output stores). Without them the only access is the peers' pushes into it, complete when its
  // recv_bar is (waited above by every thread): no barrier, whose latency was the end of every call.
  if constexpr (!kPush || kTail) dc::cluster_sync_relaxed<kCluster>();
  dc::stamp(6);
}

}  // namespace hp

// grid.x = T * cluster, block.x = kHeadpadThreads. One entry point per shape (launch_kernel picks the
// function, as swap-AB's: a single entry that dispatched on %cluster_nctarank jumped over the other shape's
// code into lines not yet fetched; perf-notes, session 17). The portable shape (cluster = headpad_cluster):
__global__ void __launch_bounds__(kHeadpadThreads, 1) headpad_decode_kernel(const __grid_constant__ DecodeParams p) {
  hp::decode_token<hp::Shape<hp::kSplits>>(p);
}

// The wide shape (one chunk per CTA, headpad_wide_splits), for steps whose clusters are all resident at once
// (the launcher decides from the occupancy), by a fixed unmangled name (FamilyInfo::wide_entry). Resolved only
// for keys that have it; elsewhere never launched, and it traps if it is.
extern "C" __global__ void __launch_bounds__(kHeadpadThreads, 1)
    swapjit_headpad_decode_kernel_wide(const __grid_constant__ DecodeParams p) {
  if constexpr (hp::kWideSplits > 0) {
    hp::decode_token<hp::Shape<hp::kWideSplits>>(p);
  } else {
    __trap();
  }
}

}  // namespace swapjit