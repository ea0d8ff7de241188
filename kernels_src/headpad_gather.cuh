// headpad_gather.cuh: the head-padded kernel's KV gather (SPEC §3.2 step 3): a token's chunk list (SWA
// chunks, then compressed chunks, 64 slots each), each chunk's records loaded, decoded exactly to bf16 and
// stored as a swizzled [64][512] tile, with its used-entry flags; the L2 prefetch of a later chunk (the loop's
// chunk c + 2: headpad_decode.cuh gathers the first two before its loop); and Q's tile (SPEC §3.2 steps 1-2).
#pragma once
#include "headpad_shape.cuh"

namespace swapjit {
namespace hp {

// One chunk of the token's entry list: entries j0 .. j0+n-1 of the SWA (list 0) or compressed (list 1)
// list, n in 1..64.
struct Chunk {
  int list, j0, n;
};

// Chunk `c` of the token's list: SWA chunks 0 .. swa_chunks-1, then compressed chunks.
__device__ __forceinline__ Chunk chunk_at(int c, int swa_chunks, int swa_len, int comp_len) {
  if (c < swa_chunks) return Chunk{0, c * kHeadpadChunk, min(kHeadpadChunk, swa_len - c * kHeadpadChunk)};
  const int j0 = (c - swa_chunks) * kHeadpadChunk;
  return Chunk{1, j0, min(kHeadpadChunk, comp_len - j0)};
}

// The warp's 8 slot ids of one chunk in one load (lane k < 8 holds slot warp + 8k; -1 past n), handed out by
// shuffles: the record loads then wait for one id latency, not one per slot.
__device__ __forceinline__ int chunk_lane_id(const i32* slots /* [n] this chunk's ids */, int n) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  static_assert(kHeadpadChunk / kHeadpadWarps <= 32, "one id per lane");
  const int my_s = warp + kHeadpadWarps * lane;
  return lane < kHeadpadChunk / kHeadpadWarps && my_s < n ? slots[my_s] : -1;
}

// Gathers one chunk (warp w takes slots w, w+8, ..) in groups of kGroup slots (4 or 8: kGroupOf below): all of a
// group's record loads are issued before the first decode and store (one load latency per group). Groups of 4
// keep the raw bytes beside the 128 O accumulators, and their loop stays rolled: its code is fetched once for
// both groups (instruction fetch is the largest stall of this kernel: docs/perf-notes.md, session 11).
template <int Fmt, int P, int kGroup>
__device__ __forceinline__ void gather_chunk(const CacheView& cache, const i32* slots /* [n] this chunk's ids */,
                                             int n, unsigned kv, int* valid) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int my_id = chunk_lane_id(slots, n);
  constexpr int kSlots = kHeadpadChunk / kHeadpadWarps;
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
// change no result. The warp's 8 slot ids come in one load and shuffles (chunk_lane_id): loaded one by
// one, each prefetch waited for its id (SASS: LDG, CCTL.E.PF2, LDG, ...), 8 load latencies in a row.
template <int Fmt, int P>
__device__ __forceinline__ void prefetch_chunk(const CacheView& cache, const i32* slots /* [n] */, int n) {
  const int lane = threadIdx.x % 32;
  const int my_id = chunk_lane_id(slots, n);
#pragma unroll
  for (int k = 0; k < kHeadpadChunk / kHeadpadWarps; ++k) {
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

// A chunk's gather in groups of kGroupOf<Fmt, kPrologue> slots a warp: the loop's gathers run beside the 128 O
// accumulators (groups of 4); the prologue's two, before O is live, take all 8 of a warp's slots in one group (one
// record-load latency a chunk instead of two: 1-2.5 % with v41 records, session 29 runs 4-5). Not for v4_fp8,
// whose RoPE pieces carry 8 more raw registers a slot: there it measured 0.99-1.01.
template <int Fmt, bool kPrologue>
constexpr int kGroupOf = kPrologue && Fmt != kFormatV4Fp8 ? 8 : 4;
template <bool kPrologue = false>
__device__ __forceinline__ void gather(const DecodeParams& p, int t, const Chunk& c, unsigned kv, int* valid) {
  if (c.list == 0) {
    constexpr int F = kKey.swa_format;
    gather_chunk<F, kKey.swa_page, kGroupOf<F, kPrologue>>(
        p.swa_cache, p.swa_slots + static_cast<i64>(t) * p.swa_width + c.j0, c.n, kv, valid);
  } else if constexpr (kHasComp) {
    constexpr int F = kKey.comp_format;
    gather_chunk<F, kKey.comp_page, kGroupOf<F, kPrologue>>(
        p.comp_cache, p.comp_slots + static_cast<i64>(t) * p.comp_width + c.j0, c.n, kv, valid);
  }
}

// Q of the M tile whose first head in the layer is hb (SPEC §3.2 steps 1-2) into the swizzled Q tile at `q` (bf16
// [64][512]), padded heads as zero rows, and the token's cos / sin row into `cs_smem` (the merge's inverse
// RoPE). Every M tile has kLive = min(kH, 64) live heads (kH > 64 only as whole M tiles). The unrotated dims
// 0..447 go as 16-B pieces (head j / 2, dims 16 c16 + 8 (j & 1), j < 2 kLive) of the 16-dim chunks c16 < 28:
// thread tid takes piece j = tid % (2 kLive) of chunks c16 = tid / (2 kLive) + kStep k. In both Q layouts
// chunk c16 + kStep of a piece lies a constant number of elements after chunk c16's, so an item's address is
// one add. Why: the (head, c8) = (i / 56, i % 56) mapping before cost ~30 SASS instructions an item (a
// division, 64-bit arithmetic, a branch), ~540 a thread at 64 heads: about as many as the first chunk's gather,
// in a prologue that the ncu profile of session 29 found issue- and dependency-bound ("wait" 33 %, "selected"
// 20 % of its samples). The 8 rotated chunks follow: thread tid rotates c8 = 56 + tid % 8 of heads tid / 8 +
// 32 k, one set of RoPE coefficients. The old per-thread c8 mapping inlined 16 rotations (~1,000 SASS
// instructions fetched on every launch: session 11). All of a thread's loads go out before the first use.
__device__ __forceinline__ void load_q_tile(const DecodeParams& p, int t, int hb, unsigned q, float* cs_smem) {
  constexpr int kLive = kH < kHeadpadMTile ? kH : kHeadpadMTile;  // every M tile: full, or the only one
  constexpr int kPlain = kNoRopeDims / 8, kRope = 64 - kPlain;     // 56 and 8 chunks of 8 dims a head
  constexpr int kPieces = 2 * kLive, kStep = kHeadpadThreads / kPieces, kC16 = kPlain / 2;
  constexpr int kPlainItems = (kC16 + kStep - 1) / kStep;
  constexpr int kRopeItems = (kLive * kRope + kHeadpadThreads - 1) / kHeadpadThreads;
  static_assert(kHeadpadThreads % kPieces == 0, "a thread's unrotated pieces share their head");
  static_assert(kHeadpadThreads % kRope == 0, "a thread's rotated chunks share c8");
  const int tid = threadIdx.x;
  const int h0 = hb;
  const float* cs = dc::cos_sin_row(p, t);
  if (tid < 64) cs_smem[tid] = cs[tid];
  if (dc::q_chunks_aligned(p)) {
    const int ph = (tid % kPieces) >> 1, pc8 = 2 * (tid / kPieces) + (tid & 1);  // item 0: head, 8-dim chunk
    const int rh = tid / kRope, rc8 = kPlain + tid % kRope;                      // rotated item 0
    // Elements between a thread's consecutive items: kStep 16-dim chunks; 256 / 8 = 32 heads.
    const i64 plain_step = kKey.q_layout == kQLayoutChunk16 ? static_cast<i64>(kStep) * p.q_h_pad * 16 : 16 * kStep;
    constexpr int kRopeStep = (kKey.q_layout == kQLayoutChunk16 ? 16 : kHeadDim) * (kHeadpadThreads / kRope);
    const u16* plain_src = dc::q_chunk8_src(p, t, h0 + ph, pc8);
    const u16* rope_src = dc::q_chunk8_src(p, t, h0 + rh, rc8);
    // Whether item k exists (the same test at its load and its store): every item where the pieces divide
    // evenly (64 and 32 heads), else a bound.
    uint4 plain[kPlainItems], rot[kRopeItems];
#pragma unroll
    for (int k = 0; k < kPlainItems; ++k) {
      if (kStep * (k + 1) <= kC16 || tid / kPieces + kStep * k < kC16)
        plain[k] = *reinterpret_cast<const uint4*>(plain_src + k * plain_step);
    }
#pragma unroll
    for (int k = 0; k < kRopeItems; ++k) {
      if (kRope * kLive >= kHeadpadThreads * (k + 1) || rh + (kHeadpadThreads / kRope) * k < kLive)
        rot[k] = *reinterpret_cast<const uint4*>(rope_src + k * kRopeStep);
    }
    const dc::RopeCoefs rope = dc::rope_coefs(rc8, cs);
    dc::stamp(11);  // timeline builds only: Q loads issued, RoPE coefficients arrived
#pragma unroll
    for (int k = 0; k < kPlainItems; ++k) {
      if (kStep * (k + 1) <= kC16 || tid / kPieces + kStep * k < kC16)
        st_shared_v4(q + tile_off(ph, pc8 + 2 * kStep * k), plain[k]);
    }
#pragma unroll
    for (int k = 0; k < kRopeItems; ++k) {
      if (kRope * kLive >= kHeadpadThreads * (k + 1) || rh + (kHeadpadThreads / kRope) * k < kLive)
        st_shared_v4(q + tile_off(rh + (kHeadpadThreads / kRope) * k, rc8), dc::q_rope_chunk8(rot[k], rc8, rope));
    }
  } else {  // unaligned Q (a caller's odd stride or base): chunk by chunk, one load latency each
#pragma unroll 1
    for (int i = tid; i < kLive * 64; i += kHeadpadThreads) {
      const int c8 = i % 64;
      st_shared_v4(q + tile_off(i / 64, c8),
                   dc::q_rope_chunk8(dc::q_load_chunk8(p, t, h0 + i / 64, c8), c8, dc::rope_coefs(c8, cs)));
    }
  }
  // Padded heads: zero rows (their scores are then 0, never NaN from stale smem).
#pragma unroll 1
  for (int i = kLive * 64 + tid; i < kHeadpadMTile * 64; i += kHeadpadThreads) {
    st_shared_v4(q + tile_off(i / 64, i % 64), make_uint4(0, 0, 0, 0));
  }
}

}  // namespace hp
}  // namespace swapjit
